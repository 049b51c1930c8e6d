/* Status strings and the thread-local last error. No device needed: the failures used here are
 * argument errors that every entry point reports before touching a device. */
#include "test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const flashcl_status all_status[] = {
#define X_(name, message) name,
    FLASHCL_STATUS_TABLE(X_)
#undef X_
};
static const char *const all_messages[] = {
#define X_(name, message) message,
    FLASHCL_STATUS_TABLE(X_)
#undef X_
};
#define N_STATUS (sizeof all_status / sizeof all_status[0])

static void test_last_error_initially_empty(void **state)
{
    (void)state;
    /* runs first, before any flashcl call on this thread */
    const char *e = flashcl_last_error();
    assert_non_null(e);
    assert_string_equal(e, "");
}

static void test_status_strings(void **state)
{
    (void)state;
    assert_int_equal(FLASHCL_SUCCESS, 0);
    assert_true(N_STATUS >= 7);
    for (size_t i = 0; i < N_STATUS; i++) {
        assert_int_equal((int)all_status[i], (int)i); /* the enum is dense from 0 */
        const char *s = flashcl_status_string(all_status[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_equal(s, all_messages[i]);
        assert_string_not_equal(s, "unknown status");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, flashcl_status_string(all_status[j]));
    }
    assert_string_equal(flashcl_status_string(FLASHCL_SUCCESS), "success");
}

static void test_status_unknown(void **state)
{
    (void)state;
    const int bad[] = {-1, (int)N_STATUS, (int)N_STATUS + 1, 1000, -2147483647 - 1,
                       2147483647};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *s = flashcl_status_string((flashcl_status)bad[i]);
        assert_non_null(s);
        assert_string_equal(s, "unknown status");
    }
}

/* A call that fails with FLASHCL_INVALID_ARGUMENT without any device. */
static flashcl_status failing_call(void)
{
    flashcl_buffer *b = (flashcl_buffer *)0;
    return flashcl_buffer_create(NULL, 16, &b);
}

static void test_last_error_set_on_failure(void **state)
{
    (void)state;
    assert_int_equal(failing_call(), FLASHCL_INVALID_ARGUMENT);
    const char *e = flashcl_last_error();
    assert_non_null(e);
    assert_true(strlen(e) > 0);
    /* other argument errors, each with a message */
    size_t count = 0;
    assert_int_equal(flashcl_list_devices(NULL, 0, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_softmax(NULL, NULL, NULL, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_context_device(NULL, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_finish(NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_buffer_write(NULL, 0, &count, sizeof count),
                     FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_buffer_read(NULL, 0, &count, sizeof count),
                     FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_context_build_info(NULL, NULL, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_context_create(NULL, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
}

typedef struct thread_result {
    char before[256];      /* what the thread saw first */
    int before_null;
    flashcl_status status; /* of its own failing call */
    char after[256];       /* its own message */
} thread_result;

static void *thread_main(void *arg)
{
    thread_result *r = arg;
    const char *e = flashcl_last_error();
    r->before_null = e == NULL;
    if (e)
        snprintf(r->before, sizeof r->before, "%s", e);
    r->status = flashcl_list_devices(NULL, 0, NULL); /* a different failure */
    e = flashcl_last_error();
    snprintf(r->after, sizeof r->after, "%s", e ? e : "(null)");
    return NULL;
}

static void test_last_error_thread_local(void **state)
{
    (void)state;
    assert_int_equal(failing_call(), FLASHCL_INVALID_ARGUMENT);
    char mine[1024];
    snprintf(mine, sizeof mine, "%s", flashcl_last_error());
    assert_true(strlen(mine) > 0);

    thread_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_main, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_false(r.before_null);
    assert_string_equal(r.before, ""); /* the other thread does not see this thread's error */
    assert_int_equal(r.status, FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(r.after) > 0);
    /* and its failure did not change this thread's message */
    assert_string_equal(flashcl_last_error(), mine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_error_initially_empty), /* must stay first */
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_status_unknown),
        cmocka_unit_test(test_last_error_set_on_failure),
        cmocka_unit_test(test_last_error_thread_local),
    };
    return tu_exit_code(cmocka_run_group_tests(tests, NULL, NULL));
}
