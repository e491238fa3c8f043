// SQLite imports into Swift as it is; PushcastDatabase's SQLiteSession wraps it.
#include <sqlite3.h>
