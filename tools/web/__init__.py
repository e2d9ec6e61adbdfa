"""The web tools: web_fetch (a page as readable text, behind an SSRF guard) and web_search
(SearXNG, Brave or Tavily). May import the tools core only."""
