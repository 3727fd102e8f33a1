# The version rlock says it is (rlock --version) and its packages carry, from the release
# number in CMakeLists.txt and the git checkout it is built from (NEWS.md, "Versions"):
#   0.2.0                    the commit tagged v0.2.0, or a tree without git (a release tarball)
#   0.2.0~dev412+g1a2b3c4d5e6f  any other commit: 412 commits in its history, then its own.
# "~" sorts before the release in dpkg and rpm, and the count grows with each commit, so a newer
# build upgrades an older one (apt install ./rlock_*.deb) and the release upgrades them all.
#
# cmake -DSOURCE_DIR=... -DRELEASE=0.2.0 -DOUT=version.h -P version.cmake writes OUT (a header
# that defines RLOCK_VERSION) when what it says changed; cpack reads it from there
# (cpack_version.cmake). With -DCHANGELOG=FILE -DMAINTAINER="NAME <E-MAIL>" it also writes the
# package's changelog (Debian's format, one entry: this build, dated by its commit), which
# points to NEWS.md for what changed.

cmake_policy(SET CMP0057 NEW)  # IN_LIST, also in script mode

function(rlock_full_version source release out_var)
  set(full "${release}")
  find_program(GIT git)
  if(GIT AND EXISTS "${source}/.git")
    execute_process(COMMAND "${GIT}" -C "${source}" rev-parse --short=12 HEAD
                    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE failed ERROR_QUIET)
    execute_process(COMMAND "${GIT}" -C "${source}" tag --points-at HEAD
                    OUTPUT_VARIABLE tags OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND "${GIT}" -C "${source}" rev-list --count HEAD
                    OUTPUT_VARIABLE count OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND "${GIT}" -C "${source}" log -1 --format=%aD
                    OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REPLACE "\n" ";" tags "${tags}")
    if(failed OR NOT count MATCHES "^[0-9]+$")
      # A checkout git cannot read (another user's, a broken one): never taken for the release.
      message(WARNING "git cannot read ${source}: this build is ${release}~dev0+gunknown")
      set(full "${release}~dev0+gunknown")
    elseif(NOT "v${release}" IN_LIST tags)
      set(full "${release}~dev${count}+g${commit}")
    endif()
  endif()
  set(${out_var} "${full}" PARENT_SCOPE)
  # Without git (a tarball from git archive, which stamps each file with the commit's time):
  # SOURCE_DATE_EPOCH when it is set (string(TIMESTAMP) reads it), else NEWS.md's time, so
  # that two builds of one tarball write the same changelog.
  if(NOT date AND DEFINED ENV{SOURCE_DATE_EPOCH})
    string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  elseif(NOT date)
    file(TIMESTAMP "${source}/NEWS.md" date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  endif()
  set(${out_var}_date "${date}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND OUT)
  rlock_full_version("${SOURCE_DIR}" "${RELEASE}" full)
  # Written only when it changed (file(CONFIGURE) keeps the file as it is otherwise), so that
  # a build of the same commit recompiles nothing.
  file(CONFIGURE OUTPUT "${OUT}"
       CONTENT "// Made by packaging/version.cmake at build time.\n#define RLOCK_VERSION \"${full}\"\n"
       @ONLY)
  if(CHANGELOG)
    file(CONFIGURE OUTPUT "${CHANGELOG}" CONTENT "rlock (${full}) unstable; urgency=medium

  * What changed in each release, and how to upgrade: NEWS.md, beside this file.

 -- ${MAINTAINER}  ${full_date}
" @ONLY)
  endif()
endif()
