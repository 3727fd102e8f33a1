#include <cstdio>
#include <exception>
#include <new>

#include "cli.h"
#include "error.h"
#include "log.h"

int main(int argc, char** argv) {
  try {
    return rlock::run_command_line(argc, argv);
  } catch (const rlock::Error& e) {
    rlock::log_error(e.what());
    return e.exit_status();
  } catch (const std::bad_alloc&) {
    rlock::log_error("out of memory");
  } catch (const std::exception& e) {
    rlock::log_error(e.what());
  }
  return rlock::k_exit_internal;
}
