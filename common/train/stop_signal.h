// stop_signal.h: Ctrl-C (SIGINT) and SIGTERM, handled so that a training run
// stops between two steps, not in the middle of writing a checkpoint.
//
// The first signal only raises a flag: the trainer finishes the step it is
// in, saves a checkpoint if checkpoints are on, says where it stopped, and
// exits with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM),
// as a shell reports a process killed by that signal. A checkpoint being
// written when the signal comes is finished, never cut.
//
// A second signal means "now": the handler removes the temporaries of any
// checkpoint being written (util.h's atomic files), says so, and exits at
// once with the same status. Nothing is left half-written either way.
//
//   stop_signals_install();
//   while (step < steps) {
//       ... one step ...
//       if (stop_requested()) break;
//   }
//   if (stop_requested()) { ... save ...; return stop_exit_status(); }
#ifndef STOP_SIGNAL_H
#define STOP_SIGNAL_H

// Installs the handlers for SIGINT and SIGTERM (and clears the flag).
void stop_signals_install(void);

// The signal that asked the run to stop (SIGINT or SIGTERM), 0 when none has.
int stop_requested(void);

// "SIGINT", "SIGTERM".
const char *stop_signal_name(int sig);

// The exit status of a run stopped by stop_requested(): 128 + its number.
int stop_exit_status(void);

#endif
