#include "test.h"
void suite_core(void) {}
