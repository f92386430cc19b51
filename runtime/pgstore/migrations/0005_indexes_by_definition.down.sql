-- Version 5 builds only indexes that versions 1 and 2 create: nothing to undo.
SELECT 1;
