# bash completion for rlock(1)                                    -*- shell-script -*-

_rlock() {
    local cur prev words cword
    _init_completion -n = || return

    local verbs="run config help"
    local common="--redis --config --prefix --password-file --cacert --cacertdir --cert --key
        --sni --connect-timeout --command-timeout -q --quiet -v --verbose -h --help"
    local run_settings="-w --wait -E --conflict-exit-code --ttl --max-run --kill-signal
        --kill-after --on-lost --min-hold"
    local run_opts="-c --command -n --no-wait $run_settings"

    # The verb is the first word that is not an option.
    local i verb="" dashdash=0
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} == -- ]]; then
            dashdash=$i
            break
        fi
        if [[ -z $verb && ${words[i]} != -* ]]; then
            verb=${words[i]}
        fi
    done

    # After "--" comes the command and its own arguments.
    if ((dashdash > 0)); then
        _command_offset $((dashdash + 1))
        return
    fi

    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
        return
    fi

    case $prev in
        --on-lost)
            COMPREPLY=($(compgen -W "kill ignore" -- "$cur"))
            return
            ;;
        --kill-signal)
            COMPREPLY=($(compgen -W "TERM INT HUP QUIT KILL USR1 USR2" -- "$cur"))
            return
            ;;
        --redis)
            COMPREPLY=($(compgen -W "redis:// unix://" -- "$cur"))
            compopt -o nospace
            return
            ;;
        -w | --wait)
            COMPREPLY=($(compgen -W "inf 10s 1m 10m" -- "$cur"))
            return
            ;;
        --config | --password-file | --cacert | --cert | --key)
            _filedir
            return
            ;;
        --cacertdir)
            _filedir -d
            return
            ;;
        --ttl | --max-run | --kill-after | --min-hold | -E | --conflict-exit-code | --prefix | \
            -c | --command | --sni | --connect-timeout | --command-timeout)
            return
            ;;
    esac

    case $verb in
        run)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$run_opts $common" -- "$cur"))
            fi
            ;;
        config)
            COMPREPLY=($(compgen -W "$run_settings $common" -- "$cur"))
            ;;
        help)
            COMPREPLY=($(compgen -W "run config" -- "$cur"))
            ;;
    esac
} &&
    complete -F _rlock rlock
