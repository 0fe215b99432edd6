#include <criterion/criterion.h>
TestSuite(engine_reload, .timeout = 60);
