# bash completion for rlock(1)                                    -*- shell-script -*-

# Lock keys from `rlock list` (rlock's locks, and other programs' that start with what is typed),
# when Redis answers within a second; nothing when it does not.
_rlock_keys() {
    local keys
    keys=$(timeout 1 rlock list --connect-timeout 500ms --command-timeout 500ms "$cur*" 2>/dev/null |
        awk '{print $1}')
    COMPREPLY=($(compgen -W "$keys" -- "$cur"))
}

_rlock() {
    local cur prev words cword
    _init_completion -n = || return

    local verbs="run status inspect history check watch list acquire extend release reset-period config help"
    local common="-u --redis --tls --config --prefix --password-file --password-command --cacert --cacertdir --cert --key
        --sni --connect-timeout --command-timeout --log-format -q --quiet -v --verbose -h --help"
    local run_settings="-w --wait --timeout -E --conflict-exit-code --limit --fair --min-replicas --ttl --max-run
        --kill-signal --kill-after --on-lost --leftovers --min-hold --once-per --tz --retry-failed --record-skips
        --history-length --retention -s --shared -x --exclusive"
    local run_opts="-c --command -n --no-wait --nonblock --nb --metrics-file --heartbeat-file --stale-after
        $run_settings"

    # The verb is the first word that is neither an option nor an option's value (options
    # every command takes may come before it: rlock --redis URL status KEY).
    local i verb="" dashdash=0 valued="-u --redis --config --prefix --password-file --password-command --cacert
        --cacertdir --cert --key --sni --connect-timeout --command-timeout --log-format --every"
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} == -- ]]; then
            dashdash=$i
            break
        fi
        if [[ -z $verb && ${words[i]} != -* ]]; then
            if ((i > 1)) && [[ " "$valued" " == *" ${words[i - 1]} "* ]]; then
                continue
            fi
            verb=${words[i]}
        fi
    done

    # After "--" comes the command and its own arguments.
    if ((dashdash > 0)); then
        _command_offset $((dashdash + 1))
        return
    fi

    if [[ -z $verb ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$common --json --version" -- "$cur"))
        elif [[ " "$valued" " != *" $prev "* ]]; then
            COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
        fi
        return
    fi

    case $prev in
        --on-lost)
            COMPREPLY=($(compgen -W "kill ignore" -- "$cur"))
            return
            ;;
        --leftovers)
            COMPREPLY=($(compgen -W "wait kill" -- "$cur"))
            return
            ;;
        --log-format)
            COMPREPLY=($(compgen -W "text json" -- "$cur"))
            return
            ;;
        --kill-signal)
            COMPREPLY=($(compgen -W "TERM INT HUP QUIT KILL USR1 USR2" -- "$cur"))
            return
            ;;
        -u | --redis)
            COMPREPLY=($(compgen -W "redis:// rediss:// unix:// redis-sentinel://" -- "$cur"))
            compopt -o nospace
            return
            ;;
        -w | --wait | --timeout)
            COMPREPLY=($(compgen -W "inf 10s 1m 10m" -- "$cur"))
            return
            ;;
        --once-per)
            COMPREPLY=($(compgen -W "hour day week month 1h 1d" -- "$cur"))
            return
            ;;
        --every)
            COMPREPLY=($(compgen -W "hour day week month 25h 1d" -- "$cur"))
            return
            ;;
        --tz)
            local zones=/usr/share/zoneinfo
            COMPREPLY=($(cd "$zones" 2>/dev/null && compgen -f -- "$cur"))
            return
            ;;
        --config | --password-file | --cacert | --cert | --key | --metrics-file | --heartbeat-file)
            _filedir
            return
            ;;
        --cacertdir)
            _filedir -d
            return
            ;;
        --retention)
            COMPREPLY=($(compgen -W "inf 1d 30d" -- "$cur"))
            return
            ;;
        --ttl | --max-run | --stale-after | --kill-after | --min-hold | -E | --conflict-exit-code | --limit | \
            --min-replicas | --history-length | -n | --count | --prefix | \
            -c | --command | --sni | --connect-timeout | --command-timeout | --token)
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
            COMPREPLY=($(compgen -W "-n --no-wait $run_settings --json $common" -- "$cur"))
            ;;
        status | inspect | list | history | watch)
            if [[ $cur == -* ]]; then
                local extra="--json"
                [[ $verb == history ]] && extra="--json -n --count"
                COMPREPLY=($(compgen -W "$extra $common" -- "$cur"))
            else
                _rlock_keys
            fi
            ;;
        acquire)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "-n --no-wait -w --wait -E --conflict-exit-code --shared
                    --limit --fair --min-replicas --ttl --retention --json --while-pid --kill-signal
                    --kill-after --on-lost $common" -- "$cur"))
            fi
            ;;
        extend | release)
            if [[ $cur == -* ]]; then
                local extra="--token"
                [[ $verb == extend ]] && extra="--token --ttl" || extra="--token --force --now --all"
                COMPREPLY=($(compgen -W "$extra $common" -- "$cur"))
            else
                _rlock_keys
            fi
            ;;
        check)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--every --tz --json $common" -- "$cur"))
            else
                _rlock_keys
            fi
            ;;
        reset-period)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--once-per --tz --retention --history-length $common" -- "$cur"))
            else
                _rlock_keys
            fi
            ;;
        help)
            COMPREPLY=($(compgen -W "${verbs% help}" -- "$cur"))
            ;;
    esac
} &&
    complete -F _rlock rlock
