# bash: the completion the rlock on the PATH prints (the package installs it already made).
# source this file from ~/.bashrc, or put `source <(rlock completion bash)` there.
source <(rlock completion bash)
