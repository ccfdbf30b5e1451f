-- A desk's daily quota (issue 54 item 4; docs/caller-limits.md, "A desk's tickets"): a help
-- desk's events are never refused (Zendesk does not retry a refusal), so past its quota a desk
-- ticket's job waits for the first UTC day with room, counted in the desk owner's rows of
-- `caller_daily_tickets` (today's and the days after). Days fill in order, so the first day with
-- room is the latest one counted, or the day after it: at most two probes per ticket, whatever
-- the backlog.
--
-- Runs as its owner (SECURITY DEFINER): the API's role may count, not update jobs; the function
-- only ever delays a pending job of a ticket of `who`, never brings one forward. Callable by
-- every role, as ingest's functions are: `docs/sql/roles.sql` runs `grant_api_role()` as the RDS
-- master user, who may not grant EXECUTE on a function the migrations' role owns.
CREATE FUNCTION desk_quota_place(who text, quota int, new_ticket uuid) RETURNS date
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    today date := (now() AT TIME ZONE 'UTC')::date;
    place date;
    counted int;
BEGIN
    SELECT greatest(today, max(day)) INTO place FROM caller_daily_tickets WHERE owner = who;
    place := coalesce(place, today);
    LOOP
        INSERT INTO caller_daily_tickets AS c (owner, day, tickets) VALUES (who, place, 1)
        ON CONFLICT (owner, day) DO UPDATE SET tickets = c.tickets + 1 WHERE c.tickets < quota
        RETURNING tickets INTO counted;
        EXIT WHEN counted IS NOT NULL;
        place := place + 1;
    END LOOP;
    IF place > today THEN
        UPDATE evaluation_outbox j SET available_at = greatest(j.available_at, place::timestamp AT TIME ZONE 'UTC')
        FROM ticket t
        WHERE j.ticket_id = new_ticket AND j.status = 'pending' AND t.id = j.ticket_id AND t.owner = who;
    END IF;
    RETURN place;
END
$$;
