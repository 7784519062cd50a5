"""Writes probe.catalog.json: 28 public MCP servers, descriptions only.

Tool names and descriptions follow the servers' public READMEs as written
from memory (paraphrased where the original is long); no server or tool
comes from a dev or held-out set. Run: python3 data/probe/make_catalog.py
"""
import json, os

S = []
def server(id, desc, tools):
    S.append({"id": id, "description": desc,
              "tools": [{"name": n, "description": d} for n, d in tools]})

server("filesystem", "Secure file operations within allowed directories.", [
 ("read_text_file", "Read the complete contents of a file from the file system as text. Use head or tail to read only the first or last N lines."),
 ("read_media_file", "Read an image or audio file and return its base64 data and MIME type."),
 ("read_multiple_files", "Read the contents of multiple files simultaneously. Failed reads for individual files won't stop the entire operation."),
 ("write_file", "Create a new file or completely overwrite an existing file with new content. Use with caution as it will overwrite existing files without warning."),
 ("edit_file", "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made."),
 ("create_directory", "Create a new directory or ensure a directory exists. Can create multiple nested directories in one operation."),
 ("list_directory", "Get a detailed listing of all files and directories in a specified path. Results distinguish between files and directories with [FILE] and [DIR] prefixes."),
 ("directory_tree", "Get a recursive tree view of files and directories as a JSON structure."),
 ("move_file", "Move or rename files and directories."),
 ("search_files", "Recursively search for files and directories matching a pattern."),
 ("get_file_info", "Retrieve detailed metadata about a file or directory: size, creation time, last modified time, permissions and type."),
 ("list_allowed_directories", "Returns the list of directories that this server is allowed to access."),
])
server("desktop-commander", "Terminal commands, process management and file editing on the local machine.", [
 ("start_process", "Start a new terminal process with intelligent state detection. Runs a shell command and returns its output."),
 ("interact_with_process", "Send input to a running process (a REPL such as Python or Node) and get the response."),
 ("read_process_output", "Read output from a running terminal session."),
 ("force_terminate", "Force terminate a running terminal session."),
 ("list_sessions", "List all active terminal sessions."),
 ("list_processes", "List all running processes with PID, command name, CPU and memory usage."),
 ("kill_process", "Terminate a running process by PID."),
 ("read_file", "Read the contents of a file from the file system or a URL, with optional offset and length."),
 ("write_file", "Write or append to file contents. Use chunks of at most 30 lines."),
 ("create_directory", "Create a new directory or ensure a directory exists."),
 ("list_directory", "Get a detailed listing of all files and directories in a specified path."),
 ("move_file", "Move or rename files and directories."),
 ("start_search", "Start a streaming search for files by name or for text inside files (ripgrep)."),
 ("get_file_info", "Retrieve detailed metadata about a file or directory."),
 ("edit_block", "Apply surgical text replacements to files."),
 ("get_config", "Get the complete server configuration: blocked commands, default shell, allowed directories."),
])
server("fetch", "Web content fetching: retrieves a URL and converts HTML to markdown.", [
 ("fetch", "Fetches a URL from the internet and optionally extracts its contents as markdown. Supports start_index and max_length to read long pages in chunks."),
])
server("time", "Time and timezone conversion.", [
 ("get_current_time", "Get the current time in a specific timezone or in the system timezone."),
 ("convert_time", "Convert time between timezones."),
])
server("calculator", "", [
 ("calculate", "Calculates/evaluates the given mathematical expression and returns the result."),
])
server("git", "Tools to read, search and manipulate Git repositories.", [
 ("git_status", "Shows the working tree status"),
 ("git_diff_unstaged", "Shows changes in the working directory that are not yet staged"),
 ("git_diff_staged", "Shows changes that are staged for commit"),
 ("git_diff", "Shows differences between branches or commits"),
 ("git_commit", "Records changes to the repository"),
 ("git_add", "Adds file contents to the staging area"),
 ("git_reset", "Unstages all staged changes"),
 ("git_log", "Shows the commit logs"),
 ("git_create_branch", "Creates a new branch from an optional base branch"),
 ("git_checkout", "Switches branches"),
 ("git_show", "Shows the contents of a commit"),
 ("git_branch", "List Git branches"),
])
server("github", "GitHub API: repositories, issues, pull requests, code search.", [
 ("search_repositories", "Search for GitHub repositories"),
 ("get_file_contents", "Get the contents of a file or directory from a GitHub repository"),
 ("create_or_update_file", "Create or update a single file in a GitHub repository"),
 ("push_files", "Push multiple files to a GitHub repository in a single commit"),
 ("create_repository", "Create a new GitHub repository in your account"),
 ("fork_repository", "Fork a GitHub repository to your account or specified organization"),
 ("create_branch", "Create a new branch in a GitHub repository"),
 ("list_commits", "Get list of commits of a branch in a GitHub repository"),
 ("list_issues", "List issues in a GitHub repository with filtering options"),
 ("get_issue", "Get details of a specific issue in a GitHub repository"),
 ("create_issue", "Create a new issue in a GitHub repository"),
 ("update_issue", "Update an existing issue in a GitHub repository"),
 ("add_issue_comment", "Add a comment to an existing issue"),
 ("search_issues", "Search for issues and pull requests across GitHub repositories"),
 ("search_code", "Search for code across GitHub repositories"),
 ("create_pull_request", "Create a new pull request in a GitHub repository"),
 ("list_pull_requests", "List and filter repository pull requests"),
 ("merge_pull_request", "Merge a pull request"),
 ("get_pull_request_files", "Get the list of files changed in a pull request"),
 ("list_notifications", "List notifications for the authenticated user"),
])
server("brave-search", "Web and local search using Brave's Search API.", [
 ("brave_web_search", "Performs a web search using the Brave Search API, ideal for general queries, news, articles, and online content. Supports pagination and freshness controls."),
 ("brave_local_search", "Searches for local businesses and places using Brave's Local Search API. Returns business names, addresses, ratings, phone numbers and opening hours."),
])
server("puppeteer", "Browser automation with Puppeteer: navigate pages, take screenshots, click and fill forms.", [
 ("puppeteer_navigate", "Navigate to a URL"),
 ("puppeteer_screenshot", "Take a screenshot of the current page or a specific element"),
 ("puppeteer_click", "Click an element on the page"),
 ("puppeteer_hover", "Hover an element on the page"),
 ("puppeteer_fill", "Fill out an input field"),
 ("puppeteer_select", "Select an element on the page with Select tag"),
 ("puppeteer_evaluate", "Execute JavaScript in the browser console"),
])
server("memory", "Persistent memory using a local knowledge graph.", [
 ("create_entities", "Create multiple new entities in the knowledge graph"),
 ("create_relations", "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice"),
 ("add_observations", "Add new observations to existing entities in the knowledge graph"),
 ("delete_entities", "Delete multiple entities and their associated relations from the knowledge graph"),
 ("delete_observations", "Delete specific observations from entities in the knowledge graph"),
 ("read_graph", "Read the entire knowledge graph"),
 ("search_nodes", "Search for nodes in the knowledge graph based on a query"),
 ("open_nodes", "Open specific nodes in the knowledge graph by their names"),
])
server("sqlite", "SQLite database interaction and business intelligence.", [
 ("read_query", "Execute a SELECT query on the SQLite database"),
 ("write_query", "Execute an INSERT, UPDATE, or DELETE query on the SQLite database"),
 ("create_table", "Create a new table in the SQLite database"),
 ("list_tables", "List all tables in the SQLite database"),
 ("describe_table", "Get the schema information for a specific table"),
 ("append_insight", "Add a business insight to the memo"),
])
server("slack", "Slack workspace messaging.", [
 ("slack_list_channels", "List public channels in the workspace with pagination"),
 ("slack_post_message", "Post a new message to a Slack channel"),
 ("slack_reply_to_thread", "Reply to a specific message thread in Slack"),
 ("slack_add_reaction", "Add a reaction emoji to a message"),
 ("slack_get_channel_history", "Get recent messages from a channel"),
 ("slack_get_thread_replies", "Get all replies in a message thread"),
 ("slack_get_users", "Get a list of all users in the workspace with their basic profile information"),
 ("slack_get_user_profile", "Get detailed profile information for a specific user"),
])
server("google-maps", "Google Maps Platform: geocoding, places, directions and distances.", [
 ("maps_geocode", "Convert an address into geographic coordinates"),
 ("maps_reverse_geocode", "Convert coordinates into an address"),
 ("maps_search_places", "Search for places using Google Places API"),
 ("maps_place_details", "Get detailed information about a specific place"),
 ("maps_distance_matrix", "Calculate travel distance and time for multiple origins and destinations"),
 ("maps_elevation", "Get elevation data for locations on the earth"),
 ("maps_directions", "Get directions between two points"),
])
server("weather", "US weather from the National Weather Service.", [
 ("get_alerts", "Get weather alerts for a US state."),
 ("get_forecast", "Get weather forecast for a location given its latitude and longitude."),
])
server("gmail", "Gmail: read, search, send and organise email.", [
 ("send_email", "Sends a new email to the given recipients with subject and body, optionally with attachments."),
 ("draft_email", "Draft a new email without sending it."),
 ("read_email", "Retrieves the content of a specific email by its ID."),
 ("search_emails", "Searches for emails using Gmail search syntax."),
 ("modify_email", "Modifies email labels (move to different folders)."),
 ("delete_email", "Permanently deletes an email."),
 ("list_email_labels", "Retrieves all available Gmail labels."),
])
server("google-calendar", "Google Calendar events and availability.", [
 ("list_calendars", "List all available calendars."),
 ("list_events", "List events from a calendar within a time range."),
 ("search_events", "Search for events in a calendar by text query."),
 ("create_event", "Create a new calendar event with title, start and end time, attendees and location."),
 ("update_event", "Update an existing calendar event."),
 ("delete_event", "Delete a calendar event."),
 ("get_freebusy", "Query free/busy information for calendars in a time range."),
])
server("notion", "Notion workspace: pages, databases and blocks.", [
 ("notion_search", "Search pages and databases in the Notion workspace by title."),
 ("notion_retrieve_page", "Retrieve a Notion page by its ID."),
 ("notion_create_page", "Create a new page in Notion under a parent page or database."),
 ("notion_append_block_children", "Append new children blocks (paragraphs, lists, headings) to a page or block."),
 ("notion_query_database", "Query a Notion database with filters and sorts."),
 ("notion_update_page_properties", "Update the properties of a Notion page."),
])
server("youtube-transcript", "Retrieves transcripts of YouTube videos.", [
 ("get_transcript", "Extract the transcript of a YouTube video from its URL or ID, with an optional language."),
])
server("arxiv", "Search and read arXiv papers.", [
 ("search_papers", "Search arXiv for papers by query with optional date range and categories."),
 ("download_paper", "Download a paper by its arXiv ID and convert it to markdown."),
 ("list_papers", "List all papers that have been downloaded locally."),
 ("read_paper", "Read the full content of a downloaded paper in markdown."),
])
server("wikipedia", "Wikipedia articles and summaries.", [
 ("search_wikipedia", "Search Wikipedia for articles matching a query."),
 ("get_article", "Get the full content of a Wikipedia article."),
 ("get_summary", "Get a summary of a Wikipedia article."),
 ("get_related_topics", "Get topics related to a Wikipedia article based on its links and categories."),
])
server("postgres", "Read-only access to PostgreSQL databases.", [
 ("query", "Run a read-only SQL query"),
])
server("playwright", "Browser automation with Playwright using the page's accessibility snapshot.", [
 ("browser_navigate", "Navigate to a URL"),
 ("browser_navigate_back", "Go back to the previous page"),
 ("browser_snapshot", "Capture accessibility snapshot of the current page, this is better than screenshot"),
 ("browser_click", "Perform click on a web page"),
 ("browser_type", "Type text into editable element"),
 ("browser_fill_form", "Fill multiple form fields"),
 ("browser_select_option", "Select an option in a dropdown"),
 ("browser_take_screenshot", "Take a screenshot of the current page"),
 ("browser_press_key", "Press a key on the keyboard"),
 ("browser_wait_for", "Wait for text to appear or disappear or a specified time to pass"),
 ("browser_tabs", "List, create, close, or select a browser tab"),
 ("browser_pdf_save", "Save page as PDF"),
])
server("yahoo-finance", "Stock market data from Yahoo Finance.", [
 ("get_stock_info", "Get stock information for a ticker: price, market cap, P/E ratio, sector."),
 ("get_historical_stock_prices", "Get historical OHLCV prices for a ticker over a period and interval."),
 ("get_yahoo_finance_news", "Get news for a ticker symbol."),
 ("get_financial_statement", "Get the income statement, balance sheet or cash flow of a company."),
 ("get_recommendations", "Get analyst recommendations and upgrades or downgrades for a ticker."),
])
server("todoist", "Todoist task management.", [
 ("todoist_create_task", "Create one or more tasks in Todoist with content, due date and priority."),
 ("todoist_get_tasks", "Get a list of tasks from Todoist with various filters."),
 ("todoist_update_task", "Update an existing task in Todoist by searching for it by name."),
 ("todoist_delete_task", "Delete a task from Todoist by searching for it by name."),
 ("todoist_complete_task", "Mark a task as complete by searching for it by name."),
])
server("markitdown", "Convert documents to Markdown.", [
 ("convert_to_markdown", "Convert a resource described by an http:, https:, file: or data: URI to markdown. Handles PDF, Word, Excel, PowerPoint, HTML and images."),
])
server("hacker-news", "Hacker News stories, comments and users.", [
 ("get_stories", "Get top, new, best, ask, show or job stories from Hacker News."),
 ("get_story_info", "Get a story with its comments by ID."),
 ("search_stories", "Search Hacker News stories by query."),
 ("get_user_info", "Get a Hacker News user's profile and submissions."),
])
server("spotify", "Spotify playback and library.", [
 ("search_tracks", "Search Spotify for tracks, albums, artists or playlists."),
 ("get_now_playing", "Get the currently playing track."),
 ("playback_control", "Start, pause, skip or resume playback."),
 ("create_playlist", "Create a new playlist for the user."),
 ("add_tracks_to_playlist", "Add tracks to a playlist."),
])
server("docker", "Manage Docker containers, images, volumes and networks.", [
 ("list_containers", "List Docker containers"),
 ("create_container", "Create a new Docker container from an image"),
 ("run_container", "Run an image in a new Docker container"),
 ("stop_container", "Stop a running container"),
 ("fetch_container_logs", "Fetch logs of a container"),
 ("list_images", "List Docker images"),
 ("pull_image", "Pull a Docker image from a registry"),
 ("build_image", "Build a Docker image from a Dockerfile"),
])
server("openweather", "", [
 ("get_current_weather", "Current weather conditions for a city anywhere in the world: temperature, humidity, wind."),
 ("get_weather_forecast", "Five-day weather forecast for a city in three-hour steps."),
])

cat = {"servers": S}
out = os.path.join(os.path.dirname(__file__), "probe.catalog.json")
with open(out, "w") as f:
    json.dump(cat, f, indent=1)
    f.write("\n")
print(len(S), "servers,", sum(len(s["tools"]) for s in S), "tools ->", out)
