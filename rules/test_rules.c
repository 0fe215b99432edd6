#include <criterion/criterion.h>
Test(rules, placeholder) {}
