// Ctrl-C (SIGINT) as a flag. The handler only raises the flag (and, during a generation, says once on stderr that
// the run is being cancelled); the engine checks it inside every phase (util/cancel.h: between transformer blocks,
// conditioner layers, VAE tiles, ...) and the CLI while writing, so a run stops within about a second on a CPU and
// leaves nothing new on disk. It is installed without SA_RESTART, so a blocking terminal read returns at once (the
// session then clears the line).
//
// A second Ctrl-C during a generation ends the process at once, for a step that will not stop (a FIFO nobody
// reads, a stuck device): the handler first removes every partial output registered in util/partial_files.h —
// the temporary files of the outputs and the folders the run created — then ends the process by SIGINT (a shell
// reports status 130, as for the first Ctrl-C's exit).
//
// Any thread may run the handler (the engine's workers do not block SIGINT), so a read() on the main thread is not
// reliably interrupted: readers wait with wait_for_input(), which also watches a pipe the handler writes to.
#pragma once
#include <atomic>

namespace h3::app {

void install_interrupt_handler();
std::atomic<bool>& interrupt_flag();
// `busy`: a generation is running (the handler announces the cancel; a second Ctrl-C ends the process).
void set_generation_running(bool busy);

// Lowers the flag and forgets earlier Ctrl-Cs (call before waiting for a new line).
void clear_interrupt();
// Waits until `fd` has input (true) or Ctrl-C is pressed (false).
bool wait_for_input(int fd);

}  // namespace h3::app
