# fish completion for rlock(1)

function __rlock_no_verb
    not __fish_seen_subcommand_from run help
end

complete -c rlock -f
complete -c rlock -n __rlock_no_verb -a run -d 'hold KEY while COMMAND runs'
complete -c rlock -n __rlock_no_verb -a help -d 'show the help of a command'
complete -c rlock -n __rlock_no_verb -l version -d 'print version'
complete -c rlock -s h -l help -d 'show help'
complete -c rlock -n '__fish_seen_subcommand_from help' -a run

# Options of every verb
complete -c rlock -n '__fish_seen_subcommand_from run' -l redis -r -d 'Redis URL'
complete -c rlock -n '__fish_seen_subcommand_from run' -l prefix -r -d 'prepended to every key'
complete -c rlock -n '__fish_seen_subcommand_from run' -s q -l quiet -d 'print only errors'
complete -c rlock -n '__fish_seen_subcommand_from run' -s v -l verbose -d 'print every event'

# rlock run
complete -c rlock -n '__fish_seen_subcommand_from run' -s c -l command -r -d 'run TEXT with $SHELL -c'
complete -c rlock -n '__fish_seen_subcommand_from run' -s n -l no-wait -d 'fail at once when held'
complete -c rlock -n '__fish_seen_subcommand_from run' -s w -l wait -x -a 'inf 10s 1m 10m' -d 'wait up to D'
complete -c rlock -n '__fish_seen_subcommand_from run' -s E -l conflict-exit-code -x -d 'exit status when not obtained'
complete -c rlock -n '__fish_seen_subcommand_from run' -l ttl -x -d 'lock expiry, renewed every ttl/3'
complete -c rlock -n '__fish_seen_subcommand_from run' -l max-run -x -d 'stop the command after D'
complete -c rlock -n '__fish_seen_subcommand_from run' -l kill-signal -x -a 'TERM INT HUP QUIT KILL USR1 USR2' -d 'signal that stops the command'
complete -c rlock -n '__fish_seen_subcommand_from run' -l kill-after -x -d 'KILL this long after the kill signal'
complete -c rlock -n '__fish_seen_subcommand_from run' -l on-lost -x -a 'kill ignore' -d 'when the lock is lost'
complete -c rlock -n '__fish_seen_subcommand_from run' -l min-hold -x -d 'keep the lock at least D'
