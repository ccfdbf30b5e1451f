-- The provider keeps a batch's text (OpenAI: the input, output and error files; Anthropic: the
-- batch with its requests and results) until it is deleted. Once a submission is closed the
-- worker deletes them and records when; until then erasure reports the batches that still
-- hold an erased ticket. A submission given up while its batch was on its way (the batch then
-- cancelled) keeps that batch's id too, so its text is deleted like the others'.
ALTER TABLE batch_submission ADD COLUMN provider_deleted_at timestamptz;

-- Closed submissions whose text is still at the provider: tended with the open ones.
CREATE INDEX idx_batch_submission_undeleted ON batch_submission (created_at)
    WHERE state IN ('collected', 'abandoned') AND provider_batch_id IS NOT NULL
      AND provider_deleted_at IS NULL;
