-- When a submission's sender began sending it (after writing its lines' ledger rows, which
-- take a statement each): a submission still `sending` is judged to have lost its sender from
-- then, not from when it was recorded, so a large batch is never given up while it is sent.
ALTER TABLE batch_submission ADD COLUMN send_started_at timestamptz;
