-- Three designs of the queue side by side (docs/scale-out.md, "Designs compared"): A as built, B with HOT updates, C with range leases.
DROP TABLE IF EXISTS na, nb, nc, leases, outcomes, cursor_c, low_b;
-- A: as today
CREATE TABLE na (id bigserial PRIMARY KEY, body text NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now(),
  state text NOT NULL DEFAULT 'queued', lease_owner text, lease_expires timestamptz, attempts int NOT NULL DEFAULT 0,
  outcome text, status int, reason_code text, reason text, apns_id text, possible_duplicate bool NOT NULL DEFAULT false, finished_at timestamptz);
CREATE INDEX na_queued ON na (id) WHERE state = 'queued';
CREATE INDEX na_leased ON na (lease_expires) WHERE state = 'leased';
CREATE INDEX na_finished ON na (finished_at) WHERE state = 'done';
-- B: same columns, pkey only, fillfactor 50 (HOT updates), a low-water mark
CREATE TABLE nb (LIKE na INCLUDING DEFAULTS) WITH (fillfactor = 50);
ALTER TABLE nb ADD PRIMARY KEY (id);
CREATE TABLE low_b (low bigint NOT NULL); INSERT INTO low_b VALUES (0);
-- C: immutable notifications, range leases, append-only outcomes
CREATE TABLE nc (id bigserial PRIMARY KEY, body text NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE cursor_c (next bigint NOT NULL); INSERT INTO cursor_c VALUES (1);
CREATE TABLE leases (lo bigint PRIMARY KEY, hi bigint NOT NULL, owner text NOT NULL, expires timestamptz NOT NULL, attempts int NOT NULL DEFAULT 1);
CREATE TABLE outcomes (id bigint PRIMARY KEY, outcome text NOT NULL, status int, reason_code text, reason text, apns_id text, possible_duplicate bool NOT NULL DEFAULT false, finished_at timestamptz NOT NULL DEFAULT now());
-- 100,000 rows in each design's table.
INSERT INTO na (body) SELECT '{"id":' || g || ',"token":"' || repeat('ab', 32) || '","alert":"n' || g || '"}' FROM generate_series(1, 100000) g;
INSERT INTO nb (body) SELECT body FROM na ORDER BY id;
INSERT INTO nc (body) SELECT body FROM na ORDER BY id;
VACUUM ANALYZE;
