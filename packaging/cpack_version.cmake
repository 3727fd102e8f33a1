# Read by cpack when it makes a package (CPACK_PROJECT_CONFIG_FILE): the package's version is
# the one the build put in its binary (packaging/version.cmake wrote it in version.h), so that
# `dpkg -l rlock` and `rlock --version` agree.
file(STRINGS "${CPACK_RLOCK_VERSION_HEADER}" line REGEX "^#define RLOCK_VERSION ")
string(REGEX REPLACE "^#define RLOCK_VERSION \"(.*)\"$" "\\1" CPACK_PACKAGE_VERSION "${line}")
set(CPACK_DEBIAN_PACKAGE_VERSION "${CPACK_PACKAGE_VERSION}")
