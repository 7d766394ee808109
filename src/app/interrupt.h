// Ctrl-C (SIGINT) as a flag. The handler only raises the flag (and, during a generation, says once on stderr that
// the run stops after the current step); the engine checks the flag before every pass and between phases. It is
// installed without SA_RESTART, so a blocking terminal read returns at once (the session then clears the line).
// A second Ctrl-C during a generation ends the process the default way, for a step that takes too long.
#pragma once
#include <atomic>

namespace h3::app {

void install_interrupt_handler();
std::atomic<bool>& interrupt_flag();
// `busy`: a generation is running (the handler announces the cancel; a second Ctrl-C kills the process).
void set_generation_running(bool busy);

}  // namespace h3::app
