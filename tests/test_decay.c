#include "test.h"
void suite_decay(void) {}
