WITH c AS (UPDATE nb n SET state = 'leased', lease_owner = 'w', lease_expires = now() + interval '30 seconds', attempts = n.attempts + 1
  FROM (SELECT id FROM nb WHERE id >= (SELECT low FROM low_b) AND state = 'queued' ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED) p WHERE n.id = p.id RETURNING n.id, n.body)
SELECT min(id) AS lo, max(id) AS hi, sum(length(body)) AS bytes FROM c \gset
UPDATE low_b SET low = :hi;
BEGIN;
SET LOCAL synchronous_commit = off;
UPDATE nb SET state = 'done', outcome = 'accepted', status = 200, finished_at = now(), lease_expires = NULL WHERE id BETWEEN :lo AND :hi AND state = 'leased' AND lease_owner = 'w';
END;
