/* Diagnostic only (benches/anchor_gap.sh): a preloadable sched_yield that returns at once, to measure
 * what MPICH's yield after every progress poll of a blocking call costs. Never part of the library. */
#include <sched.h>

int sched_yield(void) { return 0; }
