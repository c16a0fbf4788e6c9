-- "Agents" now means team members everywhere (app/store/queries.py TEAM_MEMBER_EVENT): the agents of events
-- that are neither a tool answering (tool_result) nor a person (human_intervention, or the agent `user`).
-- Stored counts made by the old rule (which counted `user` and people who stepped in) are made again here.
UPDATE traces SET n_agents = (
    SELECT count(DISTINCT e.agent) FROM events e
    WHERE e.trace_id = traces.trace_id AND e.type NOT IN ('tool_result', 'human_intervention') AND e.agent <> 'user'
);
