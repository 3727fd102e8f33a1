# fish: the completion the rlock on the PATH prints (the package installs it already made).
# Put this file in ~/.config/fish/completions/.
rlock completion fish | source
