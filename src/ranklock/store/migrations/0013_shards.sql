-- Sharding on Citus (issue 25): a collection created on a Citus coordinator with workers has its
-- segments' tables distributed over this many shards (ranklock.snapshot.shards); NULL: ordinary
-- tables on one node.
ALTER TABLE ranklock.collections ADD COLUMN shards integer CHECK (shards > 0);
