/** An MCP server as the engine reported it at start. */
export interface McpServer {
  name: string;
  status?: string;
}

/** What the engine told about itself in system/init. */
export interface EngineInfo {
  model: string | null;
  tools: string[];
  mcp_servers: McpServer[];
}
