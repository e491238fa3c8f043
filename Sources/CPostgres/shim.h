// libpq imports into Swift as it is (pkg-config libpq adds -I/usr/include/postgresql);
// PushcastDatabase's PostgresSession wraps it.
#include <libpq-fe.h>
