/* Placeholder until the bell suite lands (its issue fills this file). */
#include "test.h"

void suite_bell(void) {}
