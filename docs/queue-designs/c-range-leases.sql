UPDATE cursor_c SET next = next + 500 RETURNING next - 500 AS lo, next - 1 AS hi \gset
INSERT INTO leases VALUES (:lo, :hi, 'w', now() + interval '30 seconds');
SELECT sum(length(body)) AS bytes FROM nc WHERE id BETWEEN :lo AND :hi \gset
BEGIN;
SET LOCAL synchronous_commit = off;
INSERT INTO outcomes (id, outcome, status) SELECT g, 'accepted', 200 FROM generate_series(:lo, :hi) g;
DELETE FROM leases WHERE lo = :lo;
END;
