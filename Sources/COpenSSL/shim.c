#include "COpenSSL.h"
