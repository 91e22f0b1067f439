/*
 * The objects an update script creates take the default privileges of the
 * role that runs it: the superuser who runs ALTER EXTENSION UPDATE (or
 * CREATE EXTENSION, which runs the update scripts after the install
 * script, in one transaction), or, through pg_tle, the extension's owner.
 * Refuse any, as the install script does before its first object.
 * sql/include.pl puts this first in each update script of the tle edition;
 * the extension's update scripts include it themselves.
 */
DO $$
DECLARE
	defaults pg_catalog.text;
BEGIN
	#include "checks/installer_defaults/1.2.sql"
END
$$;
