# bash completion for rlock(1)                                    -*- shell-script -*-

_rlock() {
    local cur prev words cword
    _init_completion -n = || return

    local verbs="run help"
    local common="--redis --prefix -q --quiet -v --verbose -h --help"
    local run_opts="-c --command -n --no-wait -w --wait -E --conflict-exit-code --ttl
        --max-run --kill-signal --kill-after --on-lost --min-hold"

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
        --ttl | --max-run | --kill-after | --min-hold | -E | --conflict-exit-code | --prefix | -c | --command)
            return
            ;;
    esac

    case $verb in
        run)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$run_opts $common" -- "$cur"))
            fi
            ;;
        help)
            COMPREPLY=($(compgen -W "run" -- "$cur"))
            ;;
    esac
} &&
    complete -F _rlock rlock
