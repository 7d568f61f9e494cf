"""Writes the Grafana dashboards of this folder (the JSON is what to import; edit here, run
`python3 dashboards/generate.py`, and commit both). `--check` fails when the JSON differs
from what this script writes (scripts/status_e2e.sh runs it).

Every query is written against the metric names as Prometheus shows them through the
OpenTelemetry Prometheus exporter (docs/status.md, "Prometheus"); scripts/status_e2e.sh runs
each one against a real Prometheus scraping the demo, and tests/web/check-dashboards.mjs
checks the JSON against Grafana's published schema (@grafana/schema).
"""
import json, os, sys
DS = {"type": "prometheus", "uid": "${datasource}"}

def target(expr, legend="", ref="A", fmt=None, instant=False):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend or "__auto", "refId": ref, "range": not instant, "instant": instant}
    if fmt: t["format"] = fmt
    return t

def panel(pid, title, ptype, grid, targets, description, unit=None, options=None, field_extra=None, overrides=None):
    defaults = {}
    if unit: defaults["unit"] = unit
    if field_extra: defaults.update(field_extra)
    p = {"id": pid, "type": ptype, "title": title, "description": description, "datasource": DS,
         "gridPos": dict(zip(["x","y","w","h"], grid)), "targets": targets,
         "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
         "options": options or {}}
    return p

def ts_options(legend_calcs=None):
    return {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": legend_calcs or []},
            "tooltip": {"mode": "multi", "sort": "desc"}}

def stat_options():
    return {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background", "graphMode": "none", "justifyMode": "auto", "orientation": "auto",
            "textMode": "auto", "wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard"}

def thresholds(steps):
    return {"thresholds": {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}}

def var_datasource():
    return {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "hide": 0, "refresh": 1, "regex": "", "options": [], "includeAll": False, "multi": False}

def var_query(name, label, query, include_all=True, multi=True):
    v = {"name": name, "label": label, "type": "query", "datasource": DS,
         "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
         "refresh": 2, "sort": 1, "hide": 0, "regex": "",
         "includeAll": include_all, "multi": multi, "options": []}
    if include_all: v["allValue"] = ".+"
    return v

def dashboard(uid, title, description, panels, variables, tags):
    return {"uid": uid, "title": title, "description": description, "tags": tags,
            "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1,
            "time": {"from": "now-1h", "to": "now"}, "timepicker": {}, "timezone": "browser",
            "refresh": "10s", "fiscalYearStartMonth": 0, "liveNow": False, "weekStart": "",
            "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                       "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                       "name": "Annotations & Alerts", "type": "dashboard"}]},
            "links": [], "panels": panels,
            "templating": {"list": variables}}

J = 'job=~"$job"'
# ---------------------------------------------------------------- fleet overview
overview = dashboard("tool-health-overview", "tool-health: tools overview",
  "Every tool's breaker and health at a glance (metrics of the tool-health crate as Prometheus exposes them through the OpenTelemetry Prometheus exporter).",
  [
    panel(1, "Tools tracked", "stat", [0,0,4,4], [target(f'count(tool_health_score_ratio{{{J}}})', "tools", instant=True)],
          "Tools with a breaker (every replica scraped counts its own).", options=stat_options(), field_extra={"color": {"mode": "fixed", "fixedColor": "blue"}}),
    panel(2, "Open", "stat", [4,0,4,4], [target(f'sum(tool_health_breaker_state_ratio{{{J}, tool_health_breaker_state="open"}}) or vector(0)', "open", instant=True)],
          "Breakers open now (a tool forced open reads open).", options=stat_options(), field_extra=thresholds([("green", None), ("red", 1)])),
    panel(3, "Half-open", "stat", [8,0,4,4], [target(f'sum(tool_health_breaker_state_ratio{{{J}, tool_health_breaker_state="half_open"}}) or vector(0)', "half-open", instant=True)],
          "Breakers with a probe in flight.", options=stat_options(), field_extra=thresholds([("green", None), ("purple", 1)])),
    panel(4, "Refusals per second", "stat", [12,0,4,4], [target(f'sum(rate(tool_health_calls_total{{{J}, tool_health_outcome="refused", enforced!="false"}}[$__rate_interval])) or vector(0)', "refused", instant=True)],
          "Calls the breakers turned away (shadow-mode refusals, which were let through, left out).", unit="reqps", options=stat_options(), field_extra=thresholds([("green", None), ("orange", 0.1)])),
    panel(5, "Failure share", "stat", [16,0,8,4], [target(f'sum(rate(tool_health_calls_total{{{J}, tool_health_outcome="failure"}}[$__rate_interval])) / clamp_min(sum(rate(tool_health_calls_total{{{J}, tool_health_outcome=~"success|failure"}}[$__rate_interval])), 1e-9)', "failures", instant=True)],
          "Failed calls among the calls that reached a tool.", unit="percentunit", options=stat_options(), field_extra=thresholds([("green", None), ("orange", 0.05), ("red", 0.25)])),
    panel(6, "Tools by breaker state", "timeseries", [0,4,12,8], [target(f'sum by (tool_health_breaker_state) (tool_health_breaker_state_ratio{{{J}}})', "{{tool_health_breaker_state}}")],
          "How many tools are closed, open and half-open.", options=ts_options(["lastNotNull"]),
          field_extra={"custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 20, "stacking": {"mode": "normal", "group": "A"}}},
          overrides=[{"matcher": {"id": "byName", "options": n}, "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]} for n, c in [("closed", "green"), ("open", "red"), ("half_open", "purple")]]),
    panel(7, "Sickest tools", "bargauge", [12,4,12,8], [target(f'bottomk(10, min by (gen_ai_tool_name) (tool_health_score_ratio{{{J}}}))', "{{gen_ai_tool_name}}", instant=True)],
          "The ten lowest health scores (0.3 × success rate + 0.7 × EWMA of success; latency never counts). The score is evidence, not availability: an open breaker is the state panels' to show.",
          unit="percentunit", options={"displayMode": "gradient", "orientation": "horizontal", "showUnfilled": True, "valueMode": "color", "namePlacement": "left", "sizing": "auto", "minVizHeight": 10, "minVizWidth": 0, "maxVizHeight": 300, "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False, "calcs": []},
                                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
          field_extra={"min": 0, "max": 1, **thresholds([("red", None), ("orange", 0.5), ("green", 0.8)])}),
    panel(8, "Refusals per second by tool", "timeseries", [0,12,12,8], [target(f'sum by (gen_ai_tool_name) (rate(tool_health_calls_total{{{J}, tool_health_outcome="refused", enforced!="false"}}[$__rate_interval]))', "{{gen_ai_tool_name}}")],
          "Calls refused by each tool's breaker (by this replica or by the fleet's decision).", unit="reqps", options=ts_options(["max"])),
    panel(9, "Transitions", "timeseries", [12,12,12,8], [target(f'sum by (gen_ai_tool_name, tool_health_breaker_to) (increase(tool_health_breaker_transitions_total{{{J}}}[$__rate_interval])) > 0', "{{gen_ai_tool_name}} → {{tool_health_breaker_to}}")],
          "Breaker transitions per interval, by tool and target state.", options=ts_options(["sum"]), field_extra={"custom": {"drawStyle": "bars", "fillOpacity": 60}}),
    panel(10, "Calls per second by outcome", "timeseries", [0,20,24,8], [target(f'sum by (tool_health_outcome) (rate(tool_health_calls_total{{{J}, enforced!="false"}}[$__rate_interval]))', "{{tool_health_outcome}}")],
          "Every tool's calls: success, failure, refused, cancelled.", unit="reqps", options=ts_options(["mean"]),
          overrides=[{"matcher": {"id": "byName", "options": n}, "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]} for n, c in [("success", "green"), ("failure", "red"), ("refused", "orange"), ("cancelled", "gray")]]),
  ],
  [var_datasource(), var_query("job", "Job", "label_values(tool_health_score_ratio, job)")],
  ["tool-health"])

# ---------------------------------------------------------------- one tool
T = 'job=~"$job", gen_ai_tool_name="$tool"'
one = dashboard("tool-health-tool", "tool-health: one tool",
  "One tool in detail: score, outcomes, latency and the breaker's timeline.",
  [
    panel(1, "Breaker", "state-timeline", [0,0,24,5], [target(f'2 * max(tool_health_breaker_state_ratio{{{T}, tool_health_breaker_state="open"}}) + max(tool_health_breaker_state_ratio{{{T}, tool_health_breaker_state="half_open"}})', "breaker")],
          "The breaker's state over time: closed, half-open (a probe in flight), open (refusing; a tool forced open reads open).",
          options={"mergeValues": True, "showValue": "auto", "alignValue": "left", "rowHeight": 0.9, "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False, "calcs": []}, "tooltip": {"mode": "single", "sort": "none"}},
          field_extra={"mappings": [{"type": "value", "options": {"0": {"text": "closed", "color": "green", "index": 0}, "1": {"text": "half-open", "color": "purple", "index": 1}, "2": {"text": "open", "color": "red", "index": 2}}}],
                       "color": {"mode": "thresholds"}, **thresholds([("green", None), ("purple", 1), ("red", 2)])}),
    panel(2, "Score", "timeseries", [0,5,12,8], [target(f'tool_health_score_ratio{{{T}}}', "{{instance}}")],
          "0.3 × success rate + 0.7 × EWMA of success. Healthy ≥ 0.8 > degraded ≥ 0.5 > unhealthy.", unit="percentunit", options=ts_options(["lastNotNull", "min"]),
          field_extra={"min": 0, "max": 1, **thresholds([("red", None), ("orange", 0.5), ("green", 0.8)]), "custom": {"thresholdsStyle": {"mode": "line+area"}}}),
    panel(3, "Outcomes per second", "timeseries", [12,5,12,8], [target(f'sum by (tool_health_outcome) (rate(tool_health_calls_total{{{T}, enforced!="false"}}[$__rate_interval]))', "{{tool_health_outcome}}")],
          "Successes, failures, refusals and cancellations.", unit="reqps", options=ts_options(["mean", "max"]),
          overrides=[{"matcher": {"id": "byName", "options": n}, "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]} for n, c in [("success", "green"), ("failure", "red"), ("refused", "orange"), ("cancelled", "gray")]]),
    panel(4, "Latency histogram", "heatmap", [0,13,12,9], [target(f'sum by (le) (rate(gen_ai_execute_tool_duration_seconds_bucket{{{T}}}[$__rate_interval]))', "{{le}}", fmt="heatmap")],
          "gen_ai.execute_tool.duration: calls that reached the tool, by duration bucket (the GenAI conventions' boundaries).",
          options={"calculate": False, "showValue": "auto", "yAxis": {"axisPlacement": "left", "unit": "s"}, "cellGap": 1, "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64, "fill": "dark", "scale": "exponential", "exponent": 0.5, "reverse": False},
                   "rowsFrame": {"layout": "auto"}, "legend": {"show": True}, "tooltip": {"mode": "single", "yHistogram": False}, "cellValues": {}, "filterValues": {"le": 1e-9}, "exemplars": {"color": "rgba(255,0,255,0.7)"}}),
    panel(5, "Latency percentiles", "timeseries", [12,13,12,9],
          [target(f'histogram_quantile({q}, sum by (le) (rate(gen_ai_execute_tool_duration_seconds_bucket{{{T}}}[$__rate_interval])))', f"p{int(q*100)}", ref=r) for q, r in [(0.5, "A"), (0.95, "B"), (0.99, "C")]],
          "Duration percentiles from the histogram (failed calls included).", unit="s", options=ts_options(["mean", "max"])),
    panel(6, "Transitions", "timeseries", [0,22,12,8], [target(f'sum by (tool_health_breaker_from, tool_health_breaker_to) (increase(tool_health_breaker_transitions_total{{{T}}}[$__rate_interval])) > 0', "{{tool_health_breaker_from}} → {{tool_health_breaker_to}}")],
          "Breaker transitions per interval, by edge.", options=ts_options(["sum"]), field_extra={"custom": {"drawStyle": "bars", "fillOpacity": 60}}),
    panel(7, "Failures by error type", "timeseries", [12,22,12,8], [target(f'sum by (error_type) (rate(gen_ai_execute_tool_duration_seconds_count{{{T}, error_type!=""}}[$__rate_interval]))', "{{error_type}}")],
          "Failed calls per second by error.type (`_OTHER` when none was given).", unit="reqps", options=ts_options(["mean"])),
  ],
  [var_datasource(), var_query("job", "Job", "label_values(tool_health_score_ratio, job)"),
   var_query("tool", "Tool", 'label_values(tool_health_score_ratio{job=~"$job"}, gen_ai_tool_name)', include_all=False, multi=False)],
  ["tool-health"])

# ---------------------------------------------------------------- fleet mode
fleet = dashboard("tool-health-fleet", "tool-health: fleet mode",
  "Replicas sharing breaker decisions over Valkey/Redis: connection, sync lag, decisions applied, values rejected.",
  [
    panel(1, "Replicas connected", "stat", [0,0,6,4], [target(f'sum(tool_health_fleet_connected_ratio{{{J}}})', "connected", instant=True)],
          "Replicas whose store answers now.", options=stat_options(), field_extra={"color": {"mode": "fixed", "fixedColor": "green"}}),
    panel(2, "Replicas disconnected", "stat", [6,0,6,4], [target(f'count(tool_health_fleet_connected_ratio{{{J}}} == 0) or vector(0)', "disconnected", instant=True)],
          "Replicas that cannot reach the store: they break on their own meanwhile.", options=stat_options(), field_extra=thresholds([("green", None), ("red", 1)])),
    panel(3, "Worst sync lag", "stat", [12,0,6,4], [target(f'max(tool_health_fleet_sync_lag_seconds{{{J}}})', "lag", instant=True)],
          "Seconds since the slowest replica's last complete exchange with the store.", unit="s", options=stat_options(), field_extra=thresholds([("green", None), ("orange", 5), ("red", 30)])),
    panel(4, "Fleet refusals per second", "stat", [18,0,6,4], [target(f'sum(rate(tool_health_calls_total{{{J}, tool_health_gate_source="fleet", tool_health_outcome="refused"}}[$__rate_interval])) or vector(0)', "fleet refusals", instant=True)],
          "Refusals made in episodes the fleet has a say in.", unit="reqps", options=stat_options(), field_extra={"color": {"mode": "fixed", "fixedColor": "orange"}}),
    panel(5, "Connected, by replica", "state-timeline", [0,4,24,6], [target(f'tool_health_fleet_connected_ratio{{{J}}}', "{{instance}}")],
          "1 while the replica's store answers, 0 while it does not.",
          options={"mergeValues": True, "showValue": "never", "alignValue": "left", "rowHeight": 0.9, "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False, "calcs": []}, "tooltip": {"mode": "single", "sort": "none"}},
          field_extra={"mappings": [{"type": "value", "options": {"0": {"text": "disconnected", "color": "red", "index": 0}, "1": {"text": "connected", "color": "green", "index": 1}}}], "color": {"mode": "thresholds"}, **thresholds([("red", None), ("green", 1)])}),
    panel(6, "Sync lag", "timeseries", [0,10,12,8], [target(f'max by (instance) (tool_health_fleet_sync_lag_seconds{{{J}}})', "{{instance}}")],
          "Seconds since each replica's last complete exchange with the store.", unit="s", options=ts_options(["max"])),
    panel(7, "Decisions applied", "timeseries", [12,10,12,8], [target(f'sum by (tool_health_fleet_action) (rate(tool_health_fleet_applied_total{{{J}}}[$__rate_interval]))', "{{tool_health_fleet_action}}")],
          "Other replicas' decisions applied here, per second: open, close, hold (another replica probes), control.", unit="ops", options=ts_options(["sum"])),
    panel(8, "Values rejected", "timeseries", [0,18,12,8], [target(f'sum by (tool_health_fleet_value) (increase(tool_health_fleet_rejected_total{{{J}}}[$__rate_interval]))', "{{tool_health_fleet_value}}")],
          "Values from the store not trusted (ignored), by kind: reply, message, stored, future. Anything above zero deserves a look (FLEET.md, security).", options=ts_options(["sum"]),
          field_extra=thresholds([("green", None), ("red", 1)])),
    panel(9, "Fleet refusals by tool", "timeseries", [12,18,12,8], [target(f'sum by (gen_ai_tool_name) (rate(tool_health_calls_total{{{J}, tool_health_gate_source="fleet", tool_health_outcome="refused"}}[$__rate_interval]))', "{{gen_ai_tool_name}}")],
          "Refusals in episodes the fleet has a say in, by tool.", unit="reqps", options=ts_options(["max"])),
  ],
  [var_datasource(), var_query("job", "Job", "label_values(tool_health_fleet_connected_ratio, job)")],
  ["tool-health", "fleet"])

here = os.path.dirname(os.path.abspath(__file__))
check = "--check" in sys.argv[1:]
stale = []
for name, d in [("tool-health-overview", overview), ("tool-health-tool", one), ("tool-health-fleet", fleet)]:
    path = os.path.join(here, f"{name}.json")
    text = json.dumps(d, indent=2, ensure_ascii=False) + "\n"
    if check:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                stale.append(path)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
if stale:
    sys.exit("dashboards: not what generate.py writes (run python3 dashboards/generate.py): " + ", ".join(stale))
print("dashboards: " + ("up to date" if check else "written"))
