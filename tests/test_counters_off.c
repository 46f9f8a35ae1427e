/* test_counters_off.c: PAPI whose perf_event component is disabled, as in many containers and
 * VMs where the kernel refuses perf events: counters_open_papi opens nothing and its one warning
 * names the disabled component with PAPI's reason, instead of offering each event to a
 * component that cannot count it (random mutant R28 of tests/mutants/random_sample.md, seed 5:
 * perf_event is PAPI's component 0, and a test of `cidx >= 1` in place of `cidx >= 0` skipped
 * the check; on this machine perf_event is enabled, so only a disabled one shows it). A test
 * binary of its own: the component is disabled before PAPI starts
 * (PAPI_disable_component_by_name), which test_counters' counting must not see.
 * ft-test: ranks 1 */
#include <papi.h>
#include <stdio.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/counters.h"
#include "ftllm/log.h"
#include "ftllm/timers.h"

static FtCounters *g_c; /* what open_counters opened (ft_capture runs a void function) */
static void open_counters(void)
{
    g_c = counters_open_papi("perf::TASK-CLOCK", FT_NREGIONS, ft_test_comm());
}

static void test_perf_event_disabled(void **state)
{
    (void)state;
    if (PAPI_is_initialized() != PAPI_NOT_INITED) {
        print_message("PAPI already started in this process: cannot disable a component\n");
        skip();
    }
    if (PAPI_disable_component_by_name("perf_event") != PAPI_OK) {
        print_message("this PAPI has no perf_event component to disable\n");
        skip();
    }
    log_init(0, FT_LOG_WARN);
    char out[1024], err[1024];
    ft_capture(open_counters, out, err, sizeof err);
    size_t n = strlen(err);
    printf("  warning: %s", err);
    assert_null(g_c);
    if (strstr(err, "PAPI_library_init failed")) { /* a machine where PAPI cannot start at all */
        print_message("PAPI does not start on this machine: the disabled component not checked\n");
        skip();
    }
    const char *why = "PAPI cannot count here (its perf_event component is disabled: ";
    const char *at = strstr(err, why);
    assert_non_null(at);
    assert_true(at[strlen(why)] && at[strlen(why)] != ')'); /* PAPI's reason follows */
    assert_non_null(strstr(err, "no counter columns"));
    assert_int_equal(strchr(err, '\n') - err, (long)n - 1); /* one line */
}

FT_TEST_MAIN(cmocka_unit_test(test_perf_event_disabled))
