#ifndef CCOUNTDOWNSYSTEM_H
#define CCOUNTDOWNSYSTEM_H

#ifdef __linux__
#include <sys/prctl.h>
#endif

/// Asks Linux to end the calling thread's timed waits without the usual slack (up to 50 µs
/// added to batch wake-ups). Does nothing elsewhere; returns 0 on success.
static inline int countdown_precise_timer_slack(void) {
#ifdef __linux__
    return prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#else
    return 0;
#endif
}

#endif
