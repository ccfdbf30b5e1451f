//! A desk label held (docs/labelling.md, "A label held until a second source agrees"): one
//! giver's word against both the large model and the classifier does not train and is not
//! truth until a second source agrees with it.

/// Whether the label `f` (a `ticket_feedback` row) is held: the large model answered its
/// ticket and a classifier did too (a cascade's local answer, or what it said of an audited
/// ticket: `cascade_audit`), in the policy's departments (the parameter `$departments`), none
/// of them gave the label's department, and no other giver's label of the ticket (current or
/// superseded: a ticket has one current label per kind) gives it either. A label with only the
/// model's answer to contradict is a correction like any other: it is not held.
pub fn held(departments: usize) -> String {
    format!(
        "(coalesce((
             SELECT bool_or(a.kind = 'model') AND bool_or(a.kind = 'local')
                    AND NOT bool_or(a.department = f.department)
             FROM ticket_evaluation te
             CROSS JOIN LATERAL (
                 SELECT r.answered_by, r.department FROM evaluation_result r
                 WHERE r.idempotency_key = te.idempotency_key
                 UNION ALL
                 SELECT 'local', c.department FROM cascade_audit c
                 WHERE c.idempotency_key = te.idempotency_key
             ) AS a (kind, department)
             WHERE te.ticket_id = f.ticket_id AND a.department = ANY (${departments}::text[])
         ), false)
         AND NOT EXISTS (
             SELECT 1 FROM ticket_feedback o
             WHERE o.ticket_id = f.ticket_id AND o.labeller AND o.given_by <> f.given_by
               AND o.department = f.department
         ))"
    )
}
