#!/bin/sh
# The smallest stand-in engine, for the idle-cost figure (one per session, hundreds at once):
# answers the agent's initialize, then copies stdin to stdout until EOF.
read -r _line
printf '%s\n' '{"type":"control_response","response":{"subtype":"success","request_id":"tether_agent_init","response":{"commands":[],"models":[],"account":{}}}}'
exec cat
