#!/usr/bin/env python3
"""Mutation check: each mutant breaks one safety property with a minimal edit, and the suite must
catch it (some test that passes on the real code fails on the mutant).

    tests/mutants/run.py [--work DIR] [NAME ...]

Works on a copy of the source tree (the files git knows, as they are in the work tree now) in
DIR (default: build-mutants/ at the top of the tree), built once and then rebuilt incrementally
per mutant: one source file and a link. For each mutant it runs only the tests that should catch
it. First the same tests run on the unmutated copy: a test that fails there proves nothing.
Exit status 0 when every mutant was caught; 1 when one survived or no longer applies (the code it
edits changed: update the mutant). CONTRIBUTING.md says when to run it.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# name, edits (file, the exact text to replace, which must occur once, and its replacement), and
# the tests that must catch it: "unit" (the doctest binary) or unittest names run in
# tests/integration.
MUTANTS = [
    ("release without the token compare",
     [("src/lock/lua/release.lua",
       "if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then",
       "if type(v) == 'string' then")],
     ['test_operator.Operator.test_acquire_extend_release_cycle']),
    ("renew without the token compare",
     [("src/lock/lua/renew.lua",
       "if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then",
       "if type(v) == 'string' then")],
     ['test_run_faults.LeaseLoss.test_stolen_lock_stops_the_command_and_its_children_with_76']),
    ("lease deadline from the reply time",
     [("src/lock/lease.cpp",
       "TimePoint confirmed = lease_deadline(sent, ttl_);",
       "TimePoint confirmed = lease_deadline(Clock::now(), ttl_);")],
     ['test_lease']),
    ("the guardian never told of renewals",
     [("src/lock/lease.cpp",
       "if (on_renewed_) on_renewed_(confirmed);",
       "")],
     ['test_lease.StoppedRlock.test_the_command_is_killed_before_the_lease_ends']),
    ("the guardian's deadline counted from the reply",
     [("src/lock/lease.cpp",
       "if (on_renewed_) on_renewed_(confirmed);",
       "if (on_renewed_) on_renewed_(lease_deadline(Clock::now(), ttl_));")],
     ['test_lease.StoppedRlock.test_the_command_is_killed_before_the_lease_ends']),
    ("the guardian keeps no deadline",
     [("src/process/guardian.cpp",
       "    if (pgid > 0 && deadline > 0 && !killed) {",
       "    if (false) {")],
     ['test_lease.StoppedRlock']),
    ("acquire's lease from the reply time",
     [("src/verbs/wait.cpp",
       "return Obtained{got->fence, sent,",
       "return Obtained{got->fence, Clock::now(),")],
     ['test_lease.LeaseFromSendTime.test_cut_off_after_a_late_acquire_reply']),
    ("drift ignored",
     [("src/lock/lease.h",
       "constexpr Millis lease_drift(Millis ttl) { return ttl / 100 + Millis(2); }",
       "constexpr Millis lease_drift(Millis) { return Millis(0); }")],
     ['unit']),
    ("signal to the child instead of its group",
     [("src/process/child.cpp",
       "if (pid_ > 0) ::kill(-pid_, sig);",
       "if (pid_ > 0) ::kill(pid_, sig);")],
     ['test_run_basic.RunBasics.test_max_run_stops_the_command_and_its_children_with_124']),
    ("no guardian",
     [("src/process/guardian.cpp",
       "if (pgid > 0) ::syscall(SYS_kill, -pgid, SIGKILL);",
       "(void)pgid;")],
     ['test_run_death.CommandDiesWithRlock.test_sigkill_to_rlock_alone']),
    ("guardian in rlock's process group",
     [("src/process/guardian.cpp",
       """  ::setpgid(pid, pid);
  return pid;""",
       "  return pid;"),
      ("src/process/guardian.cpp",
       """  ::syscall(SYS_setpgid, 0, 0);
""",
       "")],
     ['test_run_death.CommandDiesWithRlock.test_sigkill_to_rlocks_process_group']),
    ("a resumed command gets the terminal in the background too",
     [("src/verbs/run_supervisor.cpp",
       "  if (terminal_ && terminal_->ours()) terminal_->hand_to(a.group->pid());",
       "  if (terminal_) terminal_->hand_to(a.group->pid());")],
     ['test_job_control.JobControl.test_bg_continues_both_and_the_shell_keeps_the_terminal']),
    ("a resumed command never gets the terminal back",
     [("src/verbs/run_supervisor.cpp",
       "  if (terminal_ && terminal_->ours()) terminal_->hand_to(a.group->pid());",
       "")],
     ['test_job_control.JobControl.test_a_background_reader_stops_and_fg_gives_it_the_terminal']),
    ("rlock does not stop with its command",
     [("src/verbs/run_supervisor.cpp",
       "  if (signals_.stop_self(stop_signal, stop_signal == SIGTSTP)) resume_child(Clock::now());",
       "")],
     ['test_job_control.JobControl.test_ctrl_z_stops_both_and_fg_continues_both']),
    ("liveness judged across PID namespaces",
     [("src/lock/lock_value.cpp",
       "  if (!h.pidns.empty() && h.pidns != this_pidns()) return Liveness::other_pid_namespace;\n",
       "")],
     ['test_operator.Containers']),
    ("behind Sentinel a write counts without the sentinels' word",
     [("src/redis/sentinel.cpp",
       "      if (!write || demoted) return replies;",
       "      return replies;")],
     ['test_failover.Failover.test_planned_failover_with_no_replica_acknowledgement']),
    ("a command an ACL denies inside a script is not named",
     [("src/redis/server_error.cpp",
       "  } else if (error.find(\"can't run this command\") != std::string_view::npos) {",
       "  } else if (false) {")],
     ['test_credentials.LeastPrivilege.test_a_command_denied_inside_a_script_is_named']),
    ("a password file read once",
     [("src/redis/credentials.cpp",
       "  if (source.file) {",
       "  static std::optional<std::string> once;\n  if (once) return once;\n  if (source.file) {\n    once = *read_password_file(*source.file);")],
     ['test_credentials.Rotation.test_a_password_file_is_read_again_for_each_connection']),
    ("flock's --nonblock not taken",
     [("src/cli/cli.cpp",
       "case Into::no_wait: opt = app->add_flag(names, line.no_wait, help); break;",
       "case Into::no_wait: return;")],
     ['test_flock_compat.FlockSuite.test_the_replayed_cases']),
    ("an option before its command never takes a value",
     [("src/cli/command_line.cpp",
       "return option && option->takes_value();",
       "return false && option;")],
     ['test_cli.CommandLine.test_every_option_of_every_command_works_before_it']),
    ("no fence INCR",
     [("src/lock/lua/common.lua",
       "  local fence = redis.call('INCR', fence_key)",
       "  local fence = 0")],
     ['test_footprint.Fences.test_an_old_counter_goes_on_from_the_clock']),
    ("fence not from the clock",
     [("src/lock/lua/common.lua",
       "  if fence < clock_us then",
       "  if false then")],
     ['test_footprint.Fences.test_fences_increase_across_flushall_expiry_and_a_restart_without_data']),
    ("fence counter kept for ever",
     [("src/lock/lua/common.lua",
       "    redis.call('PEXPIRE', fence_key, retention)",
       "    redis.call('PERSIST', fence_key)")],
     ['test_footprint.Retention.test_every_helper_key_expires']),
    ("list reads every string",
     [("src/lock/lock_list.cpp",
       "  if (pattern != \"*\") {",
       "  if (true) {")],
     ['test_footprint.List.test_list_reads_no_unrelated_key']),
    ("release --force deletes the lock (no tombstone)",
     [("src/lock/lua/break_lock.lua",
       "redis.call('SET', lock, 'rlock/1 broken ' .. was .. breaker, 'PX', math.max(pttl, 1))",
       "redis.call('DEL', lock)")],
     ['test_faults.FaultSuite.test_release_force']),
    ("a tombstone shorter than the broken lease",
     [("src/lock/lua/break_lock.lua",
       "'PX', math.max(pttl, 1))",
       "'PX', math.max(math.floor(pttl / 10), 1))")],
     ['test_faults.FaultSuite.test_release_force']),
    ("a broken semaphore place freed at once",
     [("src/lock/lua/break_slots.lua",
       "      redis.call('ZADD', sem, expiry, 'broken-' .. member)\n",
       "")],
     ['test_faults.FaultSuite.test_release_force']),
    ("release does not tell the keeper of --while-pid",
     [("src/verbs/release.cpp",
       "  (void)tell_keeper(token, key, k_tell_keeper_timeout);\n",
       "")],
     ['test_keeper.WhilePid.test_the_scripts_own_release_ends_the_keeper_quietly']),
    ("the keeper does not watch its pid",
     [("src/verbs/keeper.cpp",
       "      if (pid_.all_gone()) break;\n",
       "")],
     ['test_keeper.WhilePid.test_the_lock_is_held_past_several_ttls_and_given_back_at_the_exit']),
    ("the keeper signals the script alone, not its group",
     [("src/process/pid_watch.cpp",
       "  if (group_ != 0 && ::kill(-group_, sig) == 0) return true;\n",
       "")],
     ['test_keeper.WhilePid.test_the_scripts_commands_are_stopped_with_it']),
    ("the keeper keeps the script's descriptors",
     [("src/verbs/acquire.cpp",
       "    close_inherited_descriptors();\n",
       "")],
     ['test_keeper.WhilePid.test_the_keeper_keeps_none_of_the_scripts_descriptors']),
    ("a group's holder judged by its pid alone",
     [("src/lock/lock_value.cpp",
       "  if (!h.group || (st && st->start_ticks != h.start_ticks)) return Liveness::gone;\n",
       "  return Liveness::gone;\n")],
     ['test_keeper.WhilePid.test_a_killed_leader_whose_group_runs_on_is_not_called_gone']),
    ("acquire --while-pid does not say the lock is held for the group",
     [("src/verbs/acquire.cpp",
       "  value.holder.group = pid && pid->leads_group();\n",
       "")],
     ['test_keeper.WhilePid.test_a_killed_leader_whose_group_runs_on_is_not_called_gone']),
    ("the acquisition time taken before the wait",
     [("src/lock/lua/common.lua",
       "  return (string.gsub(value, ' since=[^ ]*', ' since=' .. rfc3339(now), 1))",
       "  return value")],
     ['test_records.Records.test_a_waiters_acquisition_is_when_it_took_the_lock',
      'test_records.Records.test_acquire_wait_records_when_it_took_the_lock']),
    ("a run's start not recorded when it takes the lock (a killed rlock's run vanishes)",
     [("src/lock/lua/common.lua",
       "  if not history or not max_length or max_length <= 0 then return '' end",
       "  if true then return '' end")],
     ['test_records.Records.test_a_killed_rlocks_run_is_running_then_has_no_end']),
    ("held-for and last-run age by the host's clock",
     [("src/output/lock_view.cpp",
       "  if (s.now_ms > 0) now = WallTime(Millis(s.now_ms));\n",
       "")],
     ['test_records.HostClockAhead.test_times_are_the_servers']),
    ("an exclusive acquire that ignores shared holders",
     [("src/lock/lua/acquire.lua",
       "if not v and turn and crowded and redis.call('EXISTS', shared) == 1 then",
       "if false then")],
     ['test_shared.Shared.test_acquire_shared_extend_and_release_by_token',
      'test_shared.Shared.test_a_race_of_shared_and_exclusive_holders']),
    ("a shared acquire that ignores the holder alone",
     [("src/lock/lua/shared_acquire.lua",
       "if v then",
       "if false then")],
     ['test_shared.Shared.test_a_race_of_shared_and_exclusive_holders']),
    ("a shared acquire that ignores a queued exclusive waiter",
     [("src/lock/lua/shared_acquire.lua",
       "local ahead = exclusive_waiter_ahead(queue, sharing, redis.call('ZRANK', queue, token))",
       "local ahead = nil")],
     ['test_shared.Shared.test_a_stream_of_shared_holders_does_not_starve_an_exclusive_waiter']),
    ("shared waiters not marked as such (all taken for exclusive ones)",
     [("src/lock/lua/shared_acquire.lua",
       "    redis.call('ZADD', sharing, now + answer[4] + 1500, token)\n",
       "")],
     ['test_shared.Shared.test_one_release_lets_every_shared_waiter_in']),
    ("a shared holder in wakes no other shared waiter",
     [("src/lock/lua/sharing.lua",
       "    wake_first(queue, alive, wake_prefix, now)\n",
       "")],
     ['test_shared.Shared.test_one_release_lets_every_shared_waiter_in']),
    ("an exclusive waiter kept out by shared holders blocks long (a dead one holds them up)",
     [("src/lock/lua/acquire.lua",
       "math.min(max_block, 500)",
       "max_block")],
     ['test_shared.Shared.test_a_dead_exclusive_waiter_holds_shared_newcomers_up_2s_at_most']),
    ("--shared=false shares the lock",
     [("src/cli/cli.cpp",
       "RawValue{{count > 0 ? \"true\" : \"false\"}",
       "RawValue{{\"true\"}")],
     ['test_shared.Shared.test_a_flag_given_false_is_off']),
    ("no wake-up on release",
     [("src/lock/lua/release.lua",
       "wake_first(queue, alive, wake_prefix, now)\n",
       "")],
     ['test_wait.Waiting.test_a_release_wakes_a_waiter_long_before_the_ttl']),
    ("busy status changed",
     [("src/util/exit_status.h",
       "k_exit_busy = 75,",
       "k_exit_busy = 1,")],
     ['unit', 'test_run_basic.RunBasics.test_busy_fails_fast_with_75_and_names_the_holder']),
    ("SCAN replaced by KEYS",
     [("src/lock/lock_list.cpp",
       """  auto page = redis.call(
      {"SCAN", cursor, "MATCH", pattern, "COUNT", std::to_string(k_scan_count), "TYPE", type},
      deadline);""",
       """  (void)type;
  auto keys_reply = redis.call({"KEYS", pattern}, deadline);
  if (!keys_reply) return keys_reply.failure();
  Reply fake;
  fake.type = Reply::Type::array;
  fake.elements.resize(2);
  fake.elements[0].str = "0";
  fake.elements[1] = *keys_reply;
  Result<Reply> page = fake;""")],
     ['test_operator.Operator.test_list_finds_locks_among_20000_unrelated_keys_with_scan']),
    ("a password left in a message",
     [("src/redis/redis_url.cpp",
       'if (password) out += std::string(":") + k_redacted_secret;',
       'if (password) out += std::string(":") + *password;')],
     ['test_secrets', 'test_connection.Passwords.test_wrong_password_is_69_and_never_printed']),
    ("the command outlives a lost lock (no SIGKILL after kill-after)",
     [("src/verbs/run_supervisor.cpp", "    kill_group(now);\n  }\n}", "    a.killed_at = now;\n  }\n}")],
     ['test_run_basic.RunBasics.test_max_run_escalates_to_kill_after_kill_after']),
    ("an unrenewed lease counts as lost only at its end",
     [("src/lock/lease.h", "  return ignore_loss ? deadline : deadline - kill_after;", "  return deadline;")],
     ['unit', 'test_lease']),
    ("a broken lock's command given kill-after past the lease",
     [("src/lock/lease.cpp", "return {Act::stop, why, std::min(now + kill_after, deadline)};",
       "return {Act::stop, why, now + kill_after};")],
     ['unit']),
    ("leftovers not waited for",
     [("src/verbs/run_supervisor.cpp",
       "int live = a.group->live_group_members();",
       "int live = 0;")],
     ['test_run_leftovers.Leftovers.test_the_lock_is_held_until_the_leftover_exits']),
    ("the held lock kept on an early way out",
     [("src/lock/held_lock.cpp",
       "  if (done_) return;",
       "  return;")],
     ['test_resource_limits.ResourceLimits.test_no_processes_or_threads_left']),
    ("Redlock waits for every node",
     [("src/redis/exchange.cpp",
       "  while (!heard_enough()) {",
       "  while (true) {")],
     ['test_topologies.Redlock.test_two_of_five_black_holed_cost_no_connect_timeout',
      'test_topologies.Redlock.test_a_black_holed_first_master_costs_no_connect_timeout']),
    ("a late reply taken for a later command's",
     [("src/redis/connection.cpp",
       "  discard_ = unanswered_;",
       "  discard_ = 0;")],
     ['test_topologies.Redlock.test_late_replies_are_never_taken_for_those_of_later_commands']),
    ("zombies taken for leftovers",
     [("src/util/proc_stat.cpp",
       "if (st && st->pgrp == pgid && !has_exited(st->state)) ++live;",
       "if (st && st->pgrp == pgid) ++live;")],
     ['test_run_leftovers.Leftovers.test_a_zombie_in_the_group_is_not_waited_for']),
    ("a heartbeat never stale",
     [("src/process/heartbeat.cpp", "  return now >= deadline();", "  return false;")],
     ['test_heartbeat.Heartbeat.test_a_hung_command_is_stopped_and_the_lock_given_back']),
    ("a touch of the heartbeat file not counted",
     [("src/process/heartbeat.cpp", "  if (stamp && stamp != seen_) {", "  if (false) {")],
     ['test_heartbeat.Heartbeat.test_a_command_that_keeps_beating_runs_to_its_end', 'unit']),
    ("a hung command never KILLed",
     [("src/verbs/run_supervisor.cpp", "begin_stop(RunEnd::hung, now + kill_after_, options_.kill_signal);",
       "begin_stop(RunEnd::hung, now + std::chrono::hours(1), options_.kill_signal);")],
     ['test_heartbeat.Heartbeat.test_a_hung_command_is_stopped_and_the_lock_given_back']),
    ("histogram buckets in the map's order",
     [("src/output/metrics.cpp",
       "    std::sort(lines.begin(), lines.end(),",
       "    if (false) std::sort(lines.begin(), lines.end(),")],
     ['test_metrics.Metrics.test_histograms_of_wait_and_run_time_and_the_last_success']),
    ("the last-success gauge summed across runs",
     [("src/output/metrics.cpp", "s[series(\"rlock_last_success_timestamp_seconds\", m.key)] = m.finished_at;",
       "s[series(\"rlock_last_success_timestamp_seconds\", m.key)] += m.finished_at;")],
     ['test_metrics.Metrics.test_histograms_of_wait_and_run_time_and_the_last_success']),
    ("a failed run taken for a success",
     [("src/verbs/run.cpp", "(record.exit_status == 0 ? \"success\" : \"failure\")",
       "(record.exit_status >= 0 ? \"success\" : \"failure\")")],
     ['test_metrics.Metrics.test_histograms_of_wait_and_run_time_and_the_last_success']),
    ("a Redlock renewal ended by the first no",
     [("src/lock/lock_quorum.cpp", "deadline, Enough{quorum(), integer_yes}),",
       "deadline, Enough{quorum(), {}}),")],
     ['test_topologies.Redlock.test_a_master_that_lost_the_lock_does_not_cost_it']),
    ("check counts a failed run as a success",
     [("src/lock/check.cpp",
       "return r.end == run_end_name(RunEnd::exited) && r.exit_status == 0;",
       "return r.end == run_end_name(RunEnd::exited);")],
     ['test_check.Check.test_fails_after_only_failed_runs_naming_the_status_and_host']),
    ("check's window twice the period",
     [("src/lock/check.cpp",
       "return {now_ms - every.length.count(), \"\"};",
       "return {now_ms - 2 * every.length.count(), \"\"};")],
     ['test_check.Check.test_fails_when_the_window_has_no_run', 'unit']),
    ("watch takes an expiry for a release",
     [("src/lock/lock_watch.cpp",
       '    if (*hint == "expired" || *hint == "evicted") return {true, Evidence::notification};',
       '    if (*hint == "expired" || *hint == "evicted") return {false, Evidence::notification};'),
      ("src/lock/lock_watch.cpp",
       "  bool ran_out = pttl.count() >= 0 && pttl - since <= k_timing_margin;",
       "  bool ran_out = false;")],
     ['test_watch.WatchWithNotifications.test_scripted_lock_life',
      'test_watch.WatchByPolling.test_scripted_lock_life']),
    ("watch misses a run between two polls",
     [("src/lock/lock_watch.cpp",
       "    ran_unseen(last, now, l.fresh, l.out);\n",
       "")],
     ['test_watch.WatchByPolling.test_short_runs_are_all_told']),
    ("keyspace messages taken for replies",
     [("src/redis/connection.cpp",
       "  if (subscribed_ && reply.is_array() && reply.elements.size() >= 3 &&",
       "  if (false && reply.is_array() && reply.elements.size() >= 3 &&")],
     ['test_watch.WatchWithNotifications.test_scripted_lock_life']),
    ("a Redlock round waits for the slowest node when some lack the script",
     [("src/redis/eval.cpp", "  if (enough.yes)\n    first.yes =", "  if (false)\n    first.yes =")],
     ['test_connection.Tls.test_redlock_over_tls_with_two_of_five_black_holed']),
    ("a busy run touches the running job's heartbeat",
     [("src/verbs/run.cpp", "if (auto problem = heartbeat->check())",
       "if (auto problem = heartbeat->start(Clock::now()))")],
     ['test_heartbeat.Heartbeat.test_a_busy_run_of_the_same_job_does_not_beat_for_it']),
    ("a heartbeat's birth time not compared (a copy on a reused inode is no beat)",
     [("src/process/heartbeat.h", "ino == o.ino && same(born, o.born) && same(mtime, o.mtime);",
       "ino == o.ino && same(mtime, o.mtime);")],
     ['unit']),
    ("a heartbeat's chmod taken for a beat (ctime for the birth time)",
     [("src/process/heartbeat.cpp",
       "if (st.stx_mask & STATX_BTIME) stamp.born = {st.stx_btime.tv_sec, st.stx_btime.tv_nsec};",
       "stamp.born = {st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec};")],
     ['unit']),
    ("an old mtime taken as the time of the last look",
     [("src/process/heartbeat.cpp", "since_last_look ? now - age : now",
       "now - std::max(Clock::duration::zero(), std::min(age, now - last_look_))")],
     ['test_heartbeat.Heartbeat.test_a_copy_with_an_old_mtime_is_a_beat', 'unit']),
    ("a Redlock NOSCRIPT round asked though its verdict is known",
     [("src/redis/eval.cpp", "  if (enough.yes && rest.needed > to_ask) return out;", ""),
      ("src/redis/exchange.cpp", "(enough.needed > sent || other > sent - enough.needed)",
       "(enough.needed <= sent && other > sent - enough.needed)")],
     ['test_topologies.Redlock.test_a_known_no_does_not_wait_for_a_black_hole']),
    ("watch takes a lock lost in a restart for a release",
     [("src/verbs/watch.cpp", "watches_[i].look((*locks)[i], at, {k_outage_hint}, (*runs)[i])",
       "watches_[i].look((*locks)[i], at, {}, (*runs)[i])")],
     ['test_watch.WatchByPolling.test_a_lock_gone_in_a_restart_is_not_called_released']),
    ("history under Redlock reads the first master only",
     [("src/lock/history.cpp", "for (size_t i = 0; i < replies.size(); ++i) {",
       "for (size_t i = 0; i < 1; ++i) {")],
     ['test_topologies.Redlock.test_history_shows_the_runs_recorded_on_every_master']),
    ("history under Redlock shows twice a run sent to two masters",
     [("src/lock/history.cpp", "  if (replies.size() > 1) {", "  if (false) {")],
     ['test_topologies.Redlock.test_history_shows_the_runs_recorded_on_every_master']),
    ("history's runs of all masters not cut to --count",
     [("src/lock/history.cpp", "if (out.runs.size() > static_cast<size_t>(count)) out.runs.resize(count);",
       "")],
     ['test_topologies.Redlock.test_history_shows_the_runs_recorded_on_every_master']),
    ("a bad URL without an '@' shown whole",
     [("src/redis/redis_url.cpp", "if (at == std::string_view::npos) return without_would_be_password(text);",
       "if (at == std::string_view::npos) return std::string(text);"),
      ("src/redis/redis_url.cpp", "if (!port && at == std::string_view::npos && !all_digits(port_text))",
       "if (false)")],
     ['test_bad_input.BadInput.test_a_password_without_its_at_host_never_shows']),
    ("a history entry sent again is recorded again",
     [("src/lock/lua/common.lua", "  if not first_time and ended(ends, 'history', token, now) then return 0 end", "")],
     ['test_history.History.test_a_run_is_recorded_once_across_a_frozen_server',
      'test_resend.LostReplies.test_a_release_and_its_history_entry_whose_reply_was_lost']),
    ("a release sent again does not find the first",
     [("src/lock/lua/release.lua", "  return ended(ends, 'release', token, now) and 1 or 0", "  return 0")],
     ['test_resend.LostReplies']),
    ("a semaphore's release sent again does not find the first",
     [("src/lock/lua/semaphore_release.lua", "  return ended(ends, 'release', token, now) and 1 or 0",
       "  return 0")],
     ['test_resend.LostReplies.test_a_release_and_its_history_entry_whose_reply_was_lost']),
    ("a shared place's release sent again does not find the first",
     [("src/lock/lua/shared_release.lua", "  return ended(ends, 'release', token, now) and 1 or 0",
       "  return 0")],
     ['test_resend.LostReplies.test_a_release_and_its_history_entry_whose_reply_was_lost']),
    ("a history entry not sent again after a release's lost reply",
     [("src/lock/held_lock.cpp", "    if (released) {\n", "    if (!released && history) history->reset();\n    if (released) {\n")],
     ['test_resend.ConnectionKills']),
    ("an end of run never sent again",
     [("src/redis/retry.cpp", "  if (!may_have_run(failure) || Clock::now() >= give_up_) return false;",
       "  return false;")],
     ['test_resend.ConnectionKills', 'test_resend.LostReplies.test_the_end_of_a_period_whose_reply_was_lost']),
    ("a waiter's attempt waits for its reply past the end of the wait",
     [("src/verbs/wait.cpp", "    if (!give_up_ || *give_up_ == start_) return deadline;",
       "    return deadline;")],
     ['test_wait.UnansweredAttempts.test_wait_ends_on_time_and_undoes_what_its_attempt_took']),
    ("a wait that gives up leaves what an unanswered attempt took",
     [("src/verbs/wait.cpp", "    if (may_hold_) {", "    if (false) {")],
     ['test_wait.UnansweredAttempts.test_wait_ends_on_time_and_undoes_what_its_attempt_took']),
    ("a second TERM only forwarded",
     [("src/verbs/run_supervisor.cpp", "(sig == SIGTERM || sig == SIGINT) && asked_again(now)", "false && asked_again(now)")],
     ['test_run_signals.SignalForwarding.test_a_second_term_kills_a_command_that_ignores_the_first']),
    ("a Cluster's refusals while it reshards not sent again",
     [("src/redis/cluster.cpp", "} else if (refused_for_now(first.str)) {", "} else if (false) {")],
     ['test_topologies.ClusterResharding.test_runs_a_holder_and_operators_through_live_migrations_of_the_lock_slot',
      'test_topologies.ClusterResharding.test_a_slot_that_no_master_serves_for_a_while_is_waited_out']),
    ("watch takes the time left at a look for the holder's ttl",
     [("src/lock/lock_watch.cpp",
       "if (now.value && now.value->ttl_ms && *now.value->ttl_ms > 0) return Millis(*now.value->ttl_ms);",
       "")],
     ['test_watch.WatchByPolling.test_a_frozen_holder_is_overdue_of_its_real_ttl',
      'test_watch.WatchByPolling.test_a_holder_first_seen_mid_lease_is_told_overdue']),
    ("a blocking write of rlock's stderr",
     [("src/util/log.cpp",
       "  write_stderr(g_format == LogFormat::json ? json_line(level, event) : text_line(level, event));",
       "  { std::string l = g_format == LogFormat::json ? json_line(level, event) : text_line(level, event); (void)!::write(2, l.data(), l.size()); }")],
     ['test_stderr.StderrNobodyReads.test_the_command_runs_to_its_end_on_its_lease_and_rlock_exits_with_it']),
    ("only the six classic signals blocked",
     [("src/process/signals.cpp",
       "  for (int sig : k_ending_signals) block_unless_ignored(sig);",
       "  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) block_unless_ignored(sig);")],
     ['test_run_signals.SignalForwarding.test_every_signal_that_ends_a_process_reaches_the_command']),
    ("terminal modes restored after the output drains",
     [("src/process/terminal.cpp", "if (have_saved_) ::tcsetattr(fd_, TCSANOW, &saved_);",
       "if (have_saved_) ::tcsetattr(fd_, TCSADRAIN, &saved_);")],
     ['test_job_control.JobControl.test_ctrl_s_costs_rlock_neither_its_lease_nor_its_end']),
    ("no slot map read again on a connection failure",
     [("src/redis/cluster_map.cpp", "  if (now < next_refresh_ || now >= deadline) return false;",
       "  if (true) return false;")],
     ['test_cluster_failover.ClusterMasterKilled.test_the_holder_keeps_its_lock_on_the_promoted_replica']),
    ("a master that times out is not followed: the map is not read at the next call",
     [("src/redis/cluster_map.cpp", "  if (!stale_) return;", "  return;")],
     ['test_cluster_failover.ClusterMasterKilled.test_a_master_that_stops_answering_is_followed_too']),
    ("a single server stands in for a dead seed",
     [("src/redis/cluster_map.cpp", "    if (!not_read) {",
       "    if (!not_read || stray_ == n->url().endpoint()) {"),
      ("src/redis/cluster_map.cpp", "  if (!stray_.empty() && (from || !first || !node_failed(*first)))",
       "  if (false)")],
     ['test_cluster_failover.SeedsOfNoCluster.test_a_single_server_never_stands_in_for_a_dead_seed']),
    ("a single server among seeds is used while it answers",
     [("src/redis/cluster_map.cpp", "  if (!stray_.empty() && (from || !first || !node_failed(*first)))",
       "  if (false)")],
     ['test_cluster_failover.SeedsOfNoCluster.test_a_single_server_among_seeds_is_refused_while_it_answers']),
    ("a single server among seeds refused at the first call only",
     [("src/redis/cluster_map.cpp", "  if (!stray_.empty()) return no_cluster();  // for as long as this process lives\n", "")],
     ['test_cluster_failover.SeedsOfOneClusterAndASingleServer.test_the_single_server_is_refused_and_nothing_is_written']),
    ("seeds that refuse CLUSTER SLOTS end every run",
     [("src/redis/cluster_map.cpp", "    map_refused_ = true;\n    return std::nullopt;", "    return first;")],
     ['test_cluster_failover.SeedsOfOneClusterAndASingleServer.test_seeds_that_refuse_cluster_slots_are_followed_by_moved']),
    ("a failure names only the first node asked",
     [("src/redis/cluster_map.cpp", "  if (!unreached_.empty()) failure.message +=",
       "  if (false) failure.message +=")],
     ['test_cluster_failover.SeedsOfNoCluster.test_the_failure_names_every_seed_tried']),
    ("the map is asked of the seeds first, each given all the time left",
     [("src/redis/cluster_map.cpp", "  for (const auto* nodes : {&known_, &seeds_})",
       "  for (const auto* nodes : {&seeds_, &known_})"),
      ("src/redis/cluster_map.cpp", "    auto not_read = read_map(*n, now + share);",
       "    auto not_read = read_map(*n, deadline);")],
     ['test_cluster_failover.ClusterMasterKilled.test_a_master_that_stops_answering_is_followed_too']),
    ("a late-comer of a period that has had its run tries the lock all the same",
     [("src/verbs/run.cpp",
       "      return **done;\n    }", "      (void)0;\n    }")],
     ['test_herd.Herd.test_a_late_comer_reads_the_period_and_never_tries_the_lock',
      'test_history.OncePer.test_a_late_comer_that_finds_another_checking_is_told_the_period_has_run']),
    ("the ends of runs never pruned by a release without history",
     [("src/lock/lua/common.lua", "local function mark_ended(ends, now, ...)\n  prune_ends(ends, now)\n",
       "local function mark_ended(ends, now, ...)\n")],
     ['test_footprint.Retention.test_the_ends_of_runs_past_keeping_go_with_every_release']),
    ("a late-comer's look at the period that timed out is followed by a try of the lock",
     [("src/verbs/run.cpp", "      if (!options_.wait) first = done.failure();",
       "      if (false) first = done.failure();")],
     ['test_herd.Herd.test_a_late_comer_against_a_hanging_server_waits_one_command_timeout']),
    ("the period named by the host's clock is taken for the server's",
     [("src/lock/history.cpp", "  if (slot_.name != guess)\n", "  if (false)\n")],
     ['test_records.HostClockAhead.test_a_period_is_the_servers_even_when_the_host_names_another']),
    ("the history entry riding in the release is added again when the release is sent again",
     [("src/lock/lua/release.lua", "  local first_time = marks[1] ~= nil",
       "  local first_time = true")],
     ['test_resend.LostReplies.test_a_release_and_its_history_entry_whose_reply_was_lost']),
    ("a stop acted on only at the renewal",
     [("src/verbs/run_supervisor.cpp", "if (fds[1].revents) lease_.drain_wakeups();",
       "if (fds[1].revents) { lease_.drain_wakeups(); if (stops_) on_stop_request(); }"),
      ("src/verbs/run_supervisor.cpp", "if (fds[2].revents) on_stop_request();", "")],
     ['test_stop.Stop.test_a_job_held_on_another_host_is_stopped_within_a_second_and_recorded']),
    ("a stop acted on after its asker gave up",
     [("src/lock/lua/stop_answer.lua", "if now_ms() > deadline then return 0 end", "")],
     ['test_stop.Stop.test_a_holder_that_does_not_answer_is_named_and_the_request_withdrawn']),
    ("a pause the acquire does not look at",
     [("src/lock/lua/acquire.lua",
       "  local stop = paused(pause, queue, alive, token, now, max_block)\n  if stop then return stop end\n",
       "")],
     ['test_pause.Pause.test_a_paused_key_runs_nothing_on_any_host_until_resumed']),
    ("a --once-per waiter woken by the period's end takes the lock all the same",
     [("src/verbs/run.cpp", "      if (!options_.once_per) return true;", "      return true;")],
     ['test_watch.WatchWithNotifications.test_once_per_waiters_that_find_the_period_done_are_no_runs']),
    ("a pause's end not told by watch",
     [("src/verbs/watch.cpp", '{"queue", "sem", "shared", "pause"}', '{"queue", "sem", "shared"}')],
     ['test_watch.WatchWithNotifications.test_a_pause_and_its_end_are_told']),
    ("an interrupted stop leaves its request",
     [("src/verbs/stop.cpp",
       "    (void)withdraw_stop_requests(redis, key, tokens, Clock::now() + redis.command_timeout());\n",
       "")],
     ['test_stop.Stop.test_ctrl_c_takes_back_a_request_not_taken_yet']),
    ("resume wakes only the first waiter",
     [("src/lock/lua/resume.lua", "redis.call('ZRANGE', queue, 0, -1)", "redis.call('ZRANGE', queue, 0, 0)")],
     ['test_pause.Pause.test_resume_wakes_every_waiter_of_a_semaphore']),
    ("a capture that waits for Redis to take what it kept before it reads on",
     [("src/lock/kept_output.cpp",
       "  std::lock_guard<std::mutex> guard(state_->mutex);\n  State& s = *state_;\n  if (s.ending) return;",
       "  std::unique_lock<std::mutex> guard(state_->mutex);\n  State& s = *state_;\n"
       "  while (!s.pending.empty() && !s.ending) s.wake.wait_for(guard, std::chrono::milliseconds(5));\n"
       "  if (s.ending) return;")],
     ['test_logs.Logs.test_a_frozen_redis_holds_up_neither_the_command_nor_the_lease_and_the_drop_is_said']),
    ("kept output trimmed by nothing",
     [("src/lock/lua/output_append.lua", "if upto and upto > keep then", "if false then")],
     ['test_logs.Logs.test_the_last_size_bytes_of_the_last_five_runs_are_kept']),
    ("another host's output printed as it is",
     [("src/verbs/logs.cpp", "out += raw_ ? p.bytes : escaper_.feed(p.bytes);", "out += p.bytes;")],
     ['test_logs.Logs.test_control_characters_are_escaped_unless_raw']),
    ("a destination gone is written on no more, but its pipe is still read",
     [("src/process/output_capture.cpp", "    if (n <= 0) {\n      close();", "    if (n <= 0) {\n      buf.clear(); off = 0;")],
     ['test_logs.Logs.test_a_reader_that_goes_away_ends_the_command_as_without_rlock']),
    ("what the command wrote before it ended given up on when its reader is slow",
     [("src/process/output_capture.cpp", "for (int i = 0; i < count; ++i) owing = owing || channels[i].owed > 0;", "")],
     ['test_logs.Logs.test_a_slow_reader_gets_all_the_command_wrote']),
    ("renewals stopped by a command that ends before the first renewal",
     [("src/verbs/run.cpp", "      renew_from_now();\n", "")],
     ['test_run_stalled.StalledReader.test_the_lease_is_renewed_while_a_reader_takes_its_time']),
    ("a stalled reader waited for after a signal or rlock stop",
     [("src/verbs/run_supervisor.cpp",
       "end.asked_to_stop = interrupted_ || stop_request_.has_value() || quit;",
       "end.asked_to_stop = false;")],
     ['test_run_stalled.StalledReader.test_term_before_the_first_renewal',
      'test_run_stalled.StalledReader.test_rlock_stop_before_the_first_renewal']),
    ("a resent piece added whole",
     [("src/lock/lua/output_append.lua", "    if offset < last_end then", "    if false then")],
     ['test_logs.Logs.test_a_piece_sent_again_adds_only_what_redis_did_not_take']),
    ("the fleet's failures counted from this host alone",
     [("src/verbs/run_notify.cpp",
       "  if (history) return failures_before(history->runs, fence);",
       "  if (history) { auto& runs = history->runs; std::string host; "
       "for (const RunRecord& r : runs) if (r.fence == fence) host = r.holder.host; "
       "std::erase_if(runs, [&](const RunRecord& r) { return r.holder.host != host; }); "
       "return failures_before(runs, fence); }")],
     ['test_notify.Notify.test_a_failure_on_three_hosts_in_turn_is_told_once_on_the_third']),
    ("the notification while the lock is held",
     [("src/verbs/run.cpp",
       "    Millis budget = redis_away ? k_quick_attempt : k_release_budget;",
       "    notify(options_, redis_, {run_result(metrics_.m), record.exit_status, "
       "Millis(record.held_ms), got_.fence, holder_.host, 0}, signals_);\n"
       "    Millis budget = redis_away ? k_quick_attempt : k_release_budget;"),
      ("src/verbs/run.cpp", "    notify(options, *redis, report, signals);", "")],
     ['test_notify.Notify.test_the_notification_runs_once_the_lock_is_given_back']),
    ("change tells every failure of a streak",
     [("src/verbs/run_notify.cpp",
       "return failed ? failures == options.notify_after : *before >= options.notify_after;",
       "return failed ? failures >= options.notify_after : *before >= options.notify_after;")],
     ['test_notify.Notify.test_change_tells_the_first_failure_and_the_recovery']),
    ("a forwarded signal does not end the retries",
     [("src/verbs/run_supervisor.cpp", "    if (ends_a_process(sig)) interrupted_ = true;\n    attempt_->group",
       "    attempt_->group")],
     ['test_notify.Retry.test_a_signal_to_rlock_during_an_attempt_is_not_retried']),
    ("a death by Ctrl-C is retried",
     [("src/verbs/run_supervisor.cpp", "end.asked_to_stop = interrupted_ || stop_request_.has_value() || quit;",
       "end.asked_to_stop = interrupted_ || stop_request_.has_value();")],
     ['test_notify.Retry.test_an_attempt_that_died_of_sigint_is_the_last']),
    ("an attempt starts without looking that the lock is still held",
     [("src/verbs/run.cpp", "      if (!still_held()) {", "      if (false) {")],
     ['test_notify.Retry.test_no_attempt_starts_once_the_lock_is_lost_even_with_on_lost_ignore']),
    ("hook group not killed when the hook's shell ends",
     [("src/process/child.cpp",
       "  if (pid_ > 0 && (!exited_ || live_group_members() > 0)) {",
       "  if (pid_ > 0 && !exited_) {")],
     ['test_notify.Notify.test_what_the_hook_left_running_is_killed_when_its_shell_ends']),
    ("the cost of a run not counted",
     [("src/process/child.cpp", "    if (r != guardian_ && !WIFSTOPPED(status)) add_usage(used);\n",
       "")],
     ['test_notify.Cost.test_peak_memory_and_cpu_time_of_the_command_and_what_it_left']),
    ("completion evaluates the key names it offers",
     [("src/verbs/completion.cpp", "\"        *) printf -v key %q \\\"$key\\\" ;;\\n\"",
       "\"        *) eval \\\"key=$key\\\" ;;\\n\"")],
     ['test_security.Completion.test_bash_offers_every_name_quoted_and_runs_none']),
    ("a file in a shared directory opened through a link",
     [("src/util/trusted_file.cpp", "flags | O_NOFOLLOW | O_CLOEXEC", "flags | O_CLOEXEC")],
     ['test_security.PlantedFiles.test_links_planted_for_the_metrics_file_are_not_followed']),
    ("a directory others may write trusted",
     [("src/util/trusted_file.cpp", "  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))",
       "  if (false)")],
     ['test_security.PlantedFiles']),
    ("a key and its own hash tag share their helper keys",
     [("src/lock/lock.cpp", "  if (key.find('}') != std::string_view::npos)\n    return std::string(key) + std::string(k_braced_separator) + std::string(kind);",
       "  if (key.find('}') != std::string_view::npos)\n    return std::string(key) + std::string(k_helper_separator) + std::string(kind);")],
     ['unit', 'test_security.SharedRedis.test_a_key_and_the_key_that_is_its_own_hash_tag_are_two_locks']),
    ("bidi overrides printed raw",
     [("src/util/text.cpp",
       " || cp == 0x061c || cp == 0x200e || cp == 0x200f ||\n"
       "         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);", ";")],
     ['test_security_text.BidiAndControls.'
      'test_every_text_verb_escapes_bidi_and_c1_in_keys_hosts_commands_reasons_and_output']),
    ("JSON writes bidi and C1 raw",
     [("src/output/output_json.cpp",
       "  return json_escape_hidden(j.dump(indent, ' ', false, json::error_handler_t::replace));",
       "  return j.dump(indent, ' ', false, json::error_handler_t::replace);")],
     ['test_security_text.BidiAndControls.test_json_writes_c1_and_bidi_as_u_sequences']),
    ("a key that is not UTF-8 lost in JSON",
     [("src/output/output_json.cpp",
       "    if (!raw.is_null()) added.emplace_back(name + \"_base64\", std::move(raw));", "")],
     ['test_security_text.RawBytesAndLongKeys.test_a_key_that_is_not_utf8_is_given_back_whole_by_json']),
    ("long keys cut alike",
     [("src/output/output.cpp", "  return cut + \"#\" + std::string(hash.data(), 8);",
       "  return cut;")],
     ['test_security_text.RawBytesAndLongKeys.'
      'test_keys_that_share_their_first_80_characters_read_as_two']),
    ("a password left in rlock's argv",
     [("src/cli/cli.cpp",
       "  hide_url_passwords(argc, argv);  // read: from here on only ARGS holds the words\n", "")],
     ['test_security_text.SecretsOfCommandsAndUrls.'
      'test_a_password_in_a_url_leaves_rlocks_arguments_once_read']),
    ("a config file others can change runs its command",
     [("src/settings/config_file.cpp", "  if (command && !access.changed_by_others.empty())",
       "  if (false)")],
     ['test_security_text.ConfigFileAccess.test_a_command_in_a_file_others_can_change_is_refused']),
    ("a password command shown whole",
     [("src/redis/credentials.cpp",
       "  return \"the password command (\" + shell_command_summary(command) + \")\";",
       "  return \"the password command (\" + command + \")\";")],
     ['test_security_text.SecretsOfCommandsAndUrls.'
      'test_a_failing_password_command_names_its_program_only']),
    ("check ignores the kept last success",
     [("src/lock/check.cpp",
       "  if (auto kept = kept_success(first[2])) add_kept_success(std::move(*kept), h);\n",
       "")],
     ['test_security_reads.SecurityReads.test_check_finds_a_success_behind_10500_failures']),
    ("logs reads a run's output unbounded",
     [("src/verbs/logs.cpp",
       "    if (shown >= k_max_keep_output) return stop_reading(key, read, *bounds);\n",
       "")],
     ['test_security_reads.SecurityReads.test_logs_stops_at_what_a_run_keeps']),
    ("history read in one piece",
     [("src/lock/history.cpp",
       "std::to_string(k_history_page_runs)};",
       "std::to_string(k_history_most_runs)};")],
     ['test_security_reads.SecurityReads.test_history_of_100000_runs_is_paged']),
    ("history JSON written past dumped()",
     [("src/output/output_json.cpp",
       "std::string history_run_json(const RunRecord& run) { return indented(run_json(run)); }",
       "std::string history_run_json(const RunRecord& run) {\n"
       "  return run_json(run).dump(2, ' ', false, json::error_handler_t::replace);\n}")],
     ['test_security_text.RawBytesAndLongKeys.'
      'test_history_check_and_watch_json_escape_hosts_and_give_back_keys']),
    ("each attempt of a retried run counted as a run",
     [("src/lock/check.h",
       "  bool first(int64_t fence) { return fence <= 0 || judged_.insert(fence).second; }",
       "  bool first(int64_t fence) { return fence <= 0 || judged_.insert(fence).second || true; }")],
     ['unit', 'test_check.RetriedRuns.test_four_failed_attempts_are_one_failed_run',
      'test_watch.WatchByPolling.'
      'test_a_retried_run_it_did_not_see_is_told_once_as_its_last_attempt_ended']),
]


def sh(args, **kw):
    return subprocess.run(args, check=True, **kw)


def prepare(work):
    """A copy of the tracked files as they are now, configured and built."""
    tree, build = os.path.join(work, "tree"), os.path.join(work, "build")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=TOP, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src, dst = os.path.join(TOP, f), os.path.join(tree, f)
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst) or open(src, "rb").read() != open(dst, "rb").read():
            # Stamped now, not with the source's time: a file edited before the copy was last
            # built would look older than what was built from it, and not be rebuilt.
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
    if not os.path.exists(os.path.join(build, "build.ninja")):
        sh(["cmake", "-S", tree, "-B", build, "-G", "Ninja"], stdout=subprocess.DEVNULL)
    return tree, build


def build_targets(build):
    r = subprocess.run(["cmake", "--build", build, "--target", "rlock", "rlock_unit",
                        "rlock_fault_section"], capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def run_tests(tree, build, tests, failures=None):
    """True when every test in TESTS passed; FAILURES gets (test, output) of those that failed."""
    env = dict(os.environ, RLOCK_BIN=os.path.join(build, "rlock"), RLOCK_SOURCE_DIR=tree,
               RLOCK_BUILD_DIR=build, PYTHONDONTWRITEBYTECODE="1",
               RLOCK_FAULT_SECTION=os.path.join(build, "tests", "rlock_fault_section"))
    ok = True
    for t in tests:
        if t == "unit":
            args = [os.path.join(build, "tests", "rlock_unit")]
        else:
            args = [sys.executable, "-m", "unittest", t]
        r = subprocess.run(args, cwd=os.path.join(tree, "tests", "integration"), env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            ok = False
            if failures is not None:
                failures.append((t, (r.stdout + r.stderr)[-3000:]))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=os.path.join(TOP, "build-mutants"))
    ap.add_argument("names", nargs="*", help="run only the mutants whose name contains one of these")
    args = ap.parse_args()
    mutants = [m for m in MUTANTS if not args.names or any(n in m[0] for n in args.names)]
    tree, build = prepare(os.path.abspath(args.work))
    ok, out = build_targets(build)
    if not ok:
        sys.exit("the unmutated copy does not build:\n" + out)
    tests = sorted({t for m in mutants for t in m[2]})
    failures = []
    if not run_tests(tree, build, tests, failures):
        for test, output in failures:
            print(f"--- {test} fails on the unmutated code:\n{output}", file=sys.stderr)
        sys.exit("a chosen test fails on the unmutated code; fix that first")

    results, bad = [], 0
    for name, edits, catchers in mutants:
        start = time.monotonic()
        originals = {}
        for path, _, _ in edits:
            with open(os.path.join(tree, path)) as f:
                originals[path] = f.read()
        mutated = dict(originals)
        for path, old, new in edits:
            if mutated[path].count(old) != 1:
                break
            mutated[path] = mutated[path].replace(old, new)
        else:
            old = None
        if old is not None:
            results.append((name, "NO LONGER APPLIES", 0))
            print(f"NO LONGER APPLIES  {name}", flush=True)
            bad += 1
            continue
        try:
            for path, text in mutated.items():
                with open(os.path.join(tree, path), "w") as f:
                    f.write(text)
            built, out = build_targets(build)
            if not built:
                verdict = "DOES NOT BUILD"
                print(out, file=sys.stderr)
                bad += 1
            elif run_tests(tree, build, catchers):
                verdict = "SURVIVED"
                bad += 1
            else:
                verdict = "caught"
        finally:
            for path, text in originals.items():
                with open(os.path.join(tree, path), "w") as f:
                    f.write(text)
                os.utime(os.path.join(tree, path))  # newer than the mutant's object
        results.append((name, verdict, time.monotonic() - start))
        print(f"{verdict:>8}  {name}  ({results[-1][2]:.0f} s; {', '.join(catchers)})",
              flush=True)
    build_targets(build)  # leave the copy unmutated
    print(f"{len(results) - bad} of {len(results)} mutants caught")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
