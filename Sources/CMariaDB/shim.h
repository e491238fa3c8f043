// libmariadb (MySQL and MariaDB's C client) imports into Swift as it is (pkg-config libmariadb
// adds -I/usr/include/mariadb); PushcastDatabase's MariaDBSession wraps it.
#include <mysql.h>
