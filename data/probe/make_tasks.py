"""Writes probe.tasks.jsonl: composite tasks over probe.catalog.json.

Written by hand in one sitting, before any routing result on this catalog
was looked at, and not edited after. Each task lists its needs as steps;
a step is satisfied by any one of its servers (two servers that can both
write a file, or both drive a browser, are alternatives). A step tagged
utility is a need the task states in one clause (a path to write to, a
URL, a date, arithmetic, a browser action, a shell command), the kind of
need a whole-prompt vector loses. Run: python3 data/probe/make_tasks.py
"""
import json, os

FILE = ["filesystem", "desktop-commander"]
SHELL = ["desktop-commander"]
FETCH = ["fetch", "markitdown", "puppeteer", "playwright"]
TIME = ["time"]
CALC = ["calculator"]
BROWSER = ["puppeteer", "playwright"]
UTIL = {"filesystem", "desktop-commander", "fetch", "time", "calculator", "puppeteer", "playwright", "markitdown"}

T = []
def task(text, *steps):
    T.append((text, [list(s) if isinstance(s, (list, tuple)) else [s] for s in steps]))

# one need
task("Check my GitHub notifications and list recent issues in acme/webapp", "github")
task("What's the weather going to be like in Lisbon for the next five days?", "openweather")
task("Are there any severe weather alerts for Texas right now?", "weather")
task("Show me the top stories on Hacker News today", "hacker-news")
task("Find Italian restaurants near Union Square that are open now", ["brave-search", "google-maps"])
task("Get the transcript of https://www.youtube.com/watch?v=dQw4w9WgXcQ", "youtube-transcript")
task("Stage all my changes and commit them with the message 'fix login redirect'", "git")
task("What tables are in my SQLite database, and what columns does the orders table have?", "sqlite")
task("Pause the music and skip to the next song", "spotify")
task("Which of my Docker containers are running, and show me the logs of the api container", "docker")
task("Add 'renew passport' to my todo list, due next Friday", "todoist")
task("Search arXiv for recent papers on speculative decoding", "arxiv")

# two needs
task("Find the three most-cited arXiv papers on retrieval-augmented generation from 2024 and save a short summary of each as Markdown to /home/me/notes/rag.md", "arxiv", FILE)
task("Get the forecast for Denver this weekend and add a 'Hiking' event to my calendar on Saturday at 9am", ["weather", "openweather"], "google-calendar")
task("I weigh 72 kg and I'm 1.80 m tall. What's my BMI? Email the result to coach@example.com", CALC, "gmail")
task("Open https://example.com/signup in the browser, fill in the form with my name and email, and click submit", BROWSER)
task("Read the README at https://raw.githubusercontent.com/golang/go/master/README.md and post a two-line summary to #eng in Slack", FETCH, "slack")
task("What time is it in Tokyo right now? Then schedule a call with Kenji tomorrow at 10am his time", TIME, "google-calendar")
task("Search the web for the latest Kubernetes release notes and write the highlights to ./k8s-release.md", "brave-search", FILE)
task("Run `npm test` in ~/projects/shop and tell me which tests fail, then open an issue on GitHub for each failure", SHELL, "github")
task("Look up Apple's current stock price and P/E ratio and save them to /tmp/aapl.txt", "yahoo-finance", FILE)
task("Summarise the Wikipedia article on the Byzantine Empire and store the key facts in my knowledge graph", "wikipedia", "memory")
task("Take a screenshot of our landing page at https://acme.io and send it to the #design channel on Slack", BROWSER, "slack")
task("How far is it from Berlin to Prague by car, and what would the fuel cost be at 7 litres per 100 km and 1.85 EUR per litre?", "google-maps", CALC)
task("Pull the latest postgres image and start a container from it, then list my running containers", "docker")
task("Find emails from my landlord about the lease and create a task in Todoist to reply by Monday", "gmail", "todoist")
task("Query the Postgres database for last month's total revenue by region and post the numbers in the #finance Slack channel", "postgres", "slack")
task("Convert the PDF at https://arxiv.org/pdf/1706.03762 to markdown and save it to papers/attention.md", ["markitdown", "fetch", "arxiv"], FILE)
task("What day of the week is it today, and what meetings do I have on my calendar this afternoon?", TIME, "google-calendar")
task("Create a new GitHub repository called data-pipeline and push the files in ./pipeline to it", "github", FILE)
task("List all the Python files in ~/src and count how many lines each one has", FILE + ["desktop-commander"])
task("Fetch https://news.ycombinator.com/rss and add the first five headlines as a new page in Notion", FETCH + ["hacker-news"], "notion")
task("Search Hacker News for discussions about Rust in the Linux kernel and email me a digest at me@example.org", "hacker-news", "gmail")
task("Find a good vegan bakery in Portland and get directions there from Pioneer Square", ["brave-search", "google-maps"], "google-maps")
task("Check the git log for commits from last week and write a changelog entry to CHANGELOG.md", "git", FILE)
task("Compute the compound interest on 10,000 dollars at 4.5% a year for 7 years, then add a reminder to my todo list to review my savings in March", CALC, "todoist")
task("Log into the vendor portal at https://portal.vendor.com, click on Invoices, and download the latest invoice as a PDF", BROWSER)
task("Play something by Nina Simone on Spotify and tell me what time it is in New York", "spotify", TIME)
task("Create a table called experiments in SQLite with columns name, date and score, and insert today's run with a score of 0.87", "sqlite")
task("Get Microsoft's last four quarterly income statements and compute the average quarter-over-quarter revenue growth", "yahoo-finance", CALC)

# three needs
task("Find the top 5 Hacker News stories about AI agents, fetch each linked article, and save a digest to /root/markdown/ai-agents.md", "hacker-news", FETCH, FILE)
task("Check the weather in Chicago for tomorrow, and if it's going to rain, move my 'Lunch walk' calendar event to Thursday and tell the #team channel in Slack", ["weather", "openweather"], "google-calendar", "slack")
task("Search arXiv for papers on protein folding from the last month, download the most relevant one, and email its abstract to lab@uni.edu", "arxiv", "gmail")
task("I'm planning a road trip: get driving directions from Salt Lake City to Zion National Park, check the forecast there for next Wednesday, and create a calendar event for the departure", "google-maps", ["weather", "openweather"], "google-calendar")
task("Look at the open pull requests on github.com/acme/api, run the test suite locally with `make test`, and comment on the PR with the result", "github", SHELL)
task("Pull Tesla's historical prices for the last 6 months, find the biggest single-day drop, and search the news for what happened that day", "yahoo-finance", ["brave-search", "yahoo-finance"])
task("Go to https://status.example.com, take a screenshot, save it to ~/reports/status.png, and post a note in Slack that the report is ready", BROWSER, FILE, "slack")
task("Read the CSV at ./data/sales.csv, calculate the total and the average sale, and store the totals in the SQLite reports table", FILE, CALC, "sqlite")
task("Find out what time it is in London, Sydney and San Francisco, and book a 30-minute meeting next Tuesday that fits all three in working hours", TIME, "google-calendar")
task("Get the transcript of this talk https://youtu.be/abc123XYZ, write a summary to talk-notes.md, and add the speaker as a person in my knowledge graph", "youtube-transcript", FILE, "memory")
task("Search my inbox for the flight confirmation from Lufthansa, add the flight to my calendar, and find a hotel near Munich airport", "gmail", "google-calendar", ["brave-search", "google-maps"])
task("List the files changed in my last commit, show the diff, and open a GitHub issue summarising the change for review", "git", "github")
task("Fetch the pricing page at https://openai.com/pricing, work out how much 3 million input tokens would cost at the listed rate, and put the figure in a Notion page called Budget", FETCH, CALC, "notion")
task("Find Wikipedia's summary of the Treaty of Westphalia, look up when it was signed relative to today (how many years ago), and save both in /tmp/history.txt", "wikipedia", [*CALC, *TIME], FILE)
task("Query Postgres for the ten customers with the most orders, email the list to sales@acme.com, and create a follow-up task for each in Todoist", "postgres", "gmail", "todoist")
task("Build the Docker image from the Dockerfile in ./service, run it, and paste the container logs into a new GitHub issue", "docker", "github")
task("Search the web for reviews of the Framework 13 laptop, open the top result in the browser and click through to the pricing section", "brave-search", BROWSER)

# four needs
task("Every Monday I need a report: get the top Hacker News stories, the weather in Boston, and AAPL's closing price, write it all to /srv/reports/monday.md and post the link in #general on Slack", "hacker-news", ["weather", "openweather"], "yahoo-finance", FILE, "slack")
task("Find the date of the next full moon, check the weather forecast for that night in Flagstaff, create a calendar event for stargazing, and email the plan to friends@example.com", ["brave-search", "wikipedia"], ["weather", "openweather"], "google-calendar", "gmail")
task("Check which Docker containers are running, run `df -h` to see the disk usage, calculate what percentage of the disk is free, and log the result to /var/log/capacity.txt", "docker", SHELL, CALC, FILE)
task("Search GitHub for the most starred Python web frameworks, fetch each project's homepage, summarise them in a Notion page, and remind me in Todoist to read it on Friday", "github", FETCH, "notion", "todoist")

# long, chatty wording with one clause per need
task("Hey, so I've been meaning to get organised. My sister's birthday is coming up on the 14th and I always forget. Could you put it in my calendar as an all-day event, and also jot down in my notes file at ~/personal/birthdays.txt that she likes orchids? Thanks a lot.", "google-calendar", FILE)
task("I'm writing a blog post about the history of the espresso machine. Can you pull together the main points from Wikipedia, check how many years ago the first patent was filed (1884, I think), and draft the intro as a file called espresso.md in my drafts folder?", "wikipedia", CALC, FILE)
task("Our on-call rotation is chaos. Can you read the last 50 messages in the #incidents Slack channel, figure out which services came up most, and open GitHub issues for the top two so we can track them? Also please save the tally somewhere, maybe /tmp/incident-tally.json.", "slack", "github", FILE)
task("Quick one: I'm flying to Singapore on Thursday and I'm never sure about the time difference. What time will it be there when it's 9am here in Paris? And can you check if there are any emails from the hotel about my booking?", TIME, "gmail")
task("My team keeps asking where the onboarding doc is. It lives on our wiki at https://wiki.acme.io/onboarding. Could you grab that page, turn it into markdown, and post it as a new page in our Notion workspace under 'Team'?", FETCH, "notion")
task("I'm trying to decide between two apartments. One is 1,450 a month and 12 minutes from work by bike, the other 1,280 and 25 minutes. Can you work out the yearly difference in rent, and check the actual cycling time from 221B Baker Street to King's Cross on the map?", CALC, "google-maps")
task("Before I push tonight's release, could you run the linter with `golangci-lint run ./...` in the repo, show me git status, and if everything's clean create a release branch called release-2.4?", SHELL, "git")
task("There's a form I have to fill in every week at https://timesheet.corp.example/entry: open it, type 40 in the hours field, pick 'Project Atlas' from the dropdown and submit. Could you do that for me, and then drop a line in my knowledge graph that the timesheet for this week is done?", BROWSER, "memory")

OUT = os.path.join(os.path.dirname(__file__), "probe.tasks.jsonl")
known = {s["id"] for s in json.load(open(os.path.join(os.path.dirname(__file__), "probe.catalog.json")))["servers"]}
with open(OUT, "w") as f:
    for i, (text, steps) in enumerate(T):
        for s in steps:
            for x in s:
                assert x in known, x
        servers = sorted({x for s in steps for x in s})
        util = [all(x in UTIL for x in s) for s in steps]
        f.write(json.dumps({"id": f"probe-{i+1:03d}", "text": text, "servers": servers,
                            "server_steps": steps, "utility_steps": util, "kind": f"needs-{len(steps)}"}) + "\n")
print(len(T), "tasks ->", OUT)
