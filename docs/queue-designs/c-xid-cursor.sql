-- Design C, claim and outcome, the cursor in (xid, id) order: only rows of transactions older than every running one, so none is passed over.
WITH c AS (SELECT xid, id FROM cursor_c FOR UPDATE),
picked AS (
  SELECT n.xid, n.id, n.body FROM nc n
  WHERE (n.xid, n.id) > ((SELECT xid FROM c), (SELECT id FROM c)) AND n.xid < pg_snapshot_xmin(pg_current_snapshot())
  ORDER BY n.xid, n.id LIMIT 500),
lo AS (SELECT xid, id FROM picked ORDER BY xid, id LIMIT 1),
hi AS (SELECT xid, id FROM picked ORDER BY xid DESC, id DESC LIMIT 1),
moved AS (UPDATE cursor_c SET xid = hi.xid, id = hi.id FROM hi RETURNING 1),
leased AS (INSERT INTO leases (lo_xid, lo_id, hi_xid, hi_id, owner, expires, token)
  SELECT lo.xid, lo.id, hi.xid, hi.id, 'w', now() + interval '30 seconds', 1 FROM lo, hi RETURNING lease)
SELECT (SELECT lease FROM leased) AS lease, quote_literal(array_agg(id)::text) AS ids, sum(length(body)) AS bytes FROM picked \gset
BEGIN;
SET LOCAL synchronous_commit = off;
INSERT INTO outcomes (id, outcome, status, owner) SELECT unnest(:ids::bigint[]), 'accepted', 200, 'w' ON CONFLICT DO NOTHING;
DELETE FROM leases WHERE lease = :lease AND owner = 'w';
END;
