-- Design C with the claim cursor in (xid, id) order (docs/scale-out.md, "Designs compared"): the tables; fill with insert-c.sql.
DROP TABLE IF EXISTS nc, cursor_c, leases, outcomes;
CREATE TABLE nc (id bigserial PRIMARY KEY, body text NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now(), xid xid8 NOT NULL DEFAULT pg_current_xact_id());
CREATE INDEX nc_order ON nc (xid, id);
CREATE TABLE cursor_c (xid xid8 NOT NULL, id bigint NOT NULL); INSERT INTO cursor_c VALUES ('0', 0);
CREATE TABLE leases (lease bigserial PRIMARY KEY, lo_xid xid8 NOT NULL, lo_id bigint NOT NULL, hi_xid xid8 NOT NULL, hi_id bigint NOT NULL,
  owner text NOT NULL, expires timestamptz NOT NULL, attempts int NOT NULL DEFAULT 1, token bigint);
CREATE INDEX leases_expires ON leases (expires);
CREATE TABLE outcomes (id bigint PRIMARY KEY, outcome text NOT NULL, status int, reason_code text, reason text, apns_id text,
  possible_duplicate bool NOT NULL DEFAULT false, attempts int NOT NULL DEFAULT 1, owner text, finished_at timestamptz NOT NULL DEFAULT now());
