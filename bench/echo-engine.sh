#!/bin/sh
# The smallest echoing stand-in engine, for the sessions-per-agent figure (one per session,
# up to hundreds at once, where a Node engine each would not fit): answers the agent's
# initialize, then writes every user line back as an assistant line, unbuffered.
read -r _line
printf '%s\n' '{"type":"control_response","response":{"subtype":"success","request_id":"tether_agent_init","response":{"commands":[],"models":[],"account":{}}}}'
exec sed -u 's/^{"type":"user"/{"type":"assistant"/'
