# fish completion for rlock(1)

function __rlock_no_verb
    not __fish_seen_subcommand_from run status inspect history check watch list acquire extend release reset-period config help
end

complete -c rlock -f
complete -c rlock -n __rlock_no_verb -a run -d 'hold KEY while COMMAND runs'
complete -c rlock -n __rlock_no_verb -a status -d 'free, or held by whom'
complete -c rlock -n __rlock_no_verb -a inspect -d 'everything about one lock'
complete -c rlock -n __rlock_no_verb -a history -d 'the latest runs of a key'
complete -c rlock -n __rlock_no_verb -a check -d 'whether a run of a key succeeded within a period'
complete -c rlock -n __rlock_no_verb -a watch -d 'one line per change of the locks'
complete -c rlock -n __rlock_no_verb -a list -d 'every lock that matches'
complete -c rlock -n __rlock_no_verb -a acquire -d 'take the lock, print the token'
complete -c rlock -n __rlock_no_verb -a extend -d 'renew a lock taken with acquire'
complete -c rlock -n __rlock_no_verb -a release -d 'give a lock back, or break it'
complete -c rlock -n __rlock_no_verb -a reset-period -d 'let a --once-per job run again this period'
complete -c rlock -n __rlock_no_verb -a config -d 'print the effective configuration'
complete -c rlock -n __rlock_no_verb -a help -d 'show the help of a command'
complete -c rlock -n __rlock_no_verb -l version -d 'print version'
complete -c rlock -s h -l help -d 'show help'
complete -c rlock -n '__fish_seen_subcommand_from help' -a 'run status inspect history check watch list acquire extend release reset-period config'

# Options of every verb, before it or after it
set -l verbs '__fish_seen_subcommand_from run status inspect history check watch list acquire extend release reset-period config'
complete -c rlock -s u -l redis -x -a 'redis:// rediss:// unix:// redis-sentinel://' -d 'Redis URL'
complete -c rlock -l tls -d 'use TLS for redis:// URLs'
complete -c rlock -l config -r -F -d 'config file'
complete -c rlock -l prefix -x -d 'prepended to every key'
complete -c rlock -l password-file -r -F -d 'file holding the Redis password'
complete -c rlock -l password-command -r -d 'command that prints the Redis password'
complete -c rlock -l cacert -r -F -d 'CA certificates for rediss://'
complete -c rlock -l cacertdir -r -a '(__fish_complete_directories)' -d 'directory of CA certificates'
complete -c rlock -l cert -r -F -d 'client certificate'
complete -c rlock -l key -r -F -d 'private key of --cert'
complete -c rlock -l sni -x -d 'TLS server name'
complete -c rlock -l connect-timeout -x -d 'connect timeout'
complete -c rlock -l command-timeout -x -d 'timeout of one Redis command'
complete -c rlock -l log-format -x -a 'text json' -d 'events on stderr as text or json'
complete -c rlock -s q -l quiet -d 'print only errors'
complete -c rlock -s v -l verbose -d 'print every event'

# rlock run (its settings also for rlock config)
complete -c rlock -n '__fish_seen_subcommand_from run' -s c -l command -r -d 'run TEXT with $SHELL -c'
complete -c rlock -n '__fish_seen_subcommand_from run' -l metrics-file -r -F -d 'Prometheus textfile to add this run to'
complete -c rlock -n '__fish_seen_subcommand_from run' -l heartbeat-file -r -F -d 'file the command touches to show it is alive'
complete -c rlock -n '__fish_seen_subcommand_from run' -l stale-after -x -d 'stop the command as hung after D without a touch'
complete -c rlock -n '__fish_seen_subcommand_from run config reset-period' -l once-per -x -a 'hour day week month 1h 1d' -d 'run at most once per period'
complete -c rlock -n '__fish_seen_subcommand_from run config reset-period check' -l tz -x -d 'time zone of calendar periods'
complete -c rlock -n '__fish_seen_subcommand_from run config' -l retry-failed -d 'run again after a failed run this period'
complete -c rlock -n '__fish_seen_subcommand_from run config' -l record-skips -d 'record skipped runs in the history'
complete -c rlock -n '__fish_seen_subcommand_from run config reset-period' -l history-length -x -d 'runs kept in the history'
complete -c rlock -n '__fish_seen_subcommand_from run config acquire reset-period' -l retention -x -a 'inf 1d 30d' -d 'how long fence counter and history outlive the last use'
complete -c rlock -n '__fish_seen_subcommand_from history' -s n -l count -x -d 'how many runs'
complete -c rlock -n '__fish_seen_subcommand_from check' -l every -x -a 'hour day week month 25h 1d' -d 'a run must have succeeded within this period'
complete -c rlock -n $verbs -s w -l wait -x -a 'inf 10s 1m 10m' -d 'wait up to D'
complete -c rlock -n $verbs -s E -l conflict-exit-code -x -d 'exit status when not obtained'
complete -c rlock -n $verbs -l ttl -x -d 'lock expiry, renewed every ttl/3'
complete -c rlock -n $verbs -l max-run -x -d 'stop the command after D'
complete -c rlock -n $verbs -l kill-signal -x -a 'TERM INT HUP QUIT KILL USR1 USR2' -d 'signal that stops the command'
complete -c rlock -n $verbs -l kill-after -x -d 'KILL this long after the kill signal'
complete -c rlock -n $verbs -l on-lost -x -a 'kill ignore' -d 'when the lock is lost'
complete -c rlock -n $verbs -l leftovers -x -a 'wait kill' -d 'processes the command left in its group'
complete -c rlock -n $verbs -l min-hold -x -d 'keep the lock at least D'

# Waiting: run, acquire, config
set -l waiting '__fish_seen_subcommand_from run acquire config'
complete -c rlock -n $waiting -s n -l no-wait -d 'fail at once when held'
complete -c rlock -n $waiting -l nonblock -d 'fail at once when held (flock -n)'
complete -c rlock -n $waiting -l nb -d 'fail at once when held (flock -n)'
complete -c rlock -n $waiting -l timeout -x -d 'wait up to D for the lock (flock -w)'
complete -c rlock -n $waiting -s x -l exclusive -d 'hold the lock alone (flock -x, the default)'
complete -c rlock -n $waiting -l limit -x -d 'up to N holders at once (semaphore)'
complete -c rlock -n $waiting -s s -l shared -d 'share the lock with other --shared holders (flock -s)'
complete -c rlock -n $waiting -l fair -d 'serve waiters in arrival order'
complete -c rlock -n $waiting -l min-replicas -x -d 'start once N replicas have the lock'

# --json: status, inspect, history, check, watch, list, acquire, config
complete -c rlock -n '__fish_seen_subcommand_from status inspect history check watch list acquire config' -l json -d 'print one JSON document'

# extend, release
complete -c rlock -n '__fish_seen_subcommand_from extend release' -l token -x -d 'token from acquire'
complete -c rlock -n '__fish_seen_subcommand_from release' -l force -d 'break the lock whoever holds it'
complete -c rlock -n '__fish_seen_subcommand_from release' -l now -d 'with --force: free it at once'
complete -c rlock -n '__fish_seen_subcommand_from release' -l all -d 'with --force: every place of a semaphore'
complete -c rlock -n '__fish_seen_subcommand_from acquire' -l while-pid -x -a '(__fish_complete_pids)' -d 'hold it while process PID lives'
