# Read by cpack when it makes a package (CPACK_PROJECT_CONFIG_FILE): the package's version is
# the build's (packaging/version.cmake), worked out now, not when the build was configured.
include("${CPACK_RLOCK_SOURCE_DIR}/packaging/version.cmake")
rlock_full_version("${CPACK_RLOCK_SOURCE_DIR}" "${CPACK_RLOCK_RELEASE}" CPACK_PACKAGE_VERSION)
set(CPACK_DEBIAN_PACKAGE_VERSION "${CPACK_PACKAGE_VERSION}")
