#include "CURing.h"
