-- The write-back keeps the agents' edits and history (issue 51 items 5 and 6; docs/zendesk.md,
-- "What is written back"). Additive: the previous release ignores the new columns.

-- `written_priority` is now what the ticket's priority was once the connector's update applied
-- (what it left, NULL: empty), whether or not it set it: a later answer writes priority only
-- while the ticket still has it. `priority_raised`: the connector made it `urgent` itself, from
-- `priority_before` (NULL: empty), so a provisional urgent the final answer does not confirm
-- is set back, to `null` if need be. Until now `written_priority` was only ever `urgent`, set by
-- the connector; a ticket written before with another priority keeps it (taken for an agent's).
ALTER TABLE zendesk_ticket ADD COLUMN priority_raised boolean NOT NULL DEFAULT false;
UPDATE zendesk_ticket SET priority_raised = true WHERE written_priority = 'urgent';

-- Whether the desk asked for this promotion's results to be written back to its Zendesk
-- tickets (`triage promote --write-back`); results of its version computed later follow it.
ALTER TABLE version_promotion ADD COLUMN write_back boolean NOT NULL DEFAULT false;

-- A delivery announced for a promotion (a reprocess's result, or a result of a version promoted
-- again), not as the ticket's answer came: the write-back leaves solved and closed tickets as
-- they were closed.
ALTER TABLE delivery ADD COLUMN promoted boolean NOT NULL DEFAULT false;
