// The review page's style sheet, inline (the page is one file); its hash is in the page's CSP.
export const STYLE = `
:root{color-scheme:light dark;--bg:#fafafa;--fg:#1c1c1c;--card:#fff;--line:#ddd;--mute:#666;--ok:#1a7f37;--re:#0969da;--bad:#cf222e;--warn:#9a6700}
@media (prefers-color-scheme:dark){:root{--bg:#111;--fg:#eee;--card:#1b1b1b;--line:#333;--mute:#999}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,sans-serif;background:var(--bg);color:var(--fg)}
.summary,.filters{padding:8px 20px;background:var(--card);border-bottom:1px solid var(--line)}
.top{position:sticky;top:0;z-index:2}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:16px 20px 8px}h3{margin:0 0 4px;font-size:15px}
.stats{display:flex;flex-wrap:wrap;gap:6px 18px}.stat b{font-size:16px}
.meta,.stop,.note,.expiry,.picks{margin:4px 0 0;color:var(--mute)}.stop{color:var(--warn)}
.picks{padding:6px 20px;margin:0}#picks-status{margin-left:8px;font-weight:600}
.filters{display:flex;gap:8px;align-items:center}
.filters button{font:inherit;padding:3px 10px;border:1px solid var(--line);border-radius:14px;background:transparent;color:inherit;cursor:pointer}
.filters button[aria-pressed=true]{background:var(--fg);color:var(--bg)}
#shown{color:var(--mute);margin-left:8px}
#episode{padding:0 20px}#episode video{max-width:480px}
#grid{display:flex;flex-wrap:wrap;gap:10px;padding:12px 20px;align-items:flex-start}
.tile{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:5px 7px}.tile[hidden]{display:none}
.tile>.open{font:600 13px ui-monospace,monospace;color:inherit;text-decoration:none}
.thumbs{display:flex;gap:6px;margin-top:3px}
.thumb{margin:0;width:160px}
.frame{display:flex;align-items:center;justify-content:center;width:160px;aspect-ratio:16/9;background:#000;border-radius:3px;overflow:hidden;text-decoration:none}
.still{width:100%;height:100%;object-fit:contain;display:block}
.nostill{color:#aaa;font-size:12px}
.thumb figcaption{font-size:12px;display:flex;gap:4px;align-items:center;flex-wrap:wrap;margin-top:2px}
.thumb[data-picked] .frame{outline:3px solid var(--ok);outline-offset:-3px}
.pick{font-size:12px;color:var(--mute);cursor:pointer}
.chips{display:flex;flex-wrap:wrap;gap:2px 8px;margin-top:3px;font-size:12px;max-width:330px}.cid{font-family:ui-monospace,monospace}
.cost,.tk{color:var(--mute)}
body[data-view=detail] #grid,body[data-view=detail] nav.filters,body[data-view=detail] #episode{display:none}
body:not([data-view=detail]) main{display:none}
main{padding:0 20px 40px}
.row{background:var(--card);border:1px solid var(--line);border-radius:8px;margin:12px 0;padding:12px}
main .row:not(.open){display:none}
.back{display:inline-block;margin-bottom:6px}main h2{display:none}
.prompt,.text{white-space:pre-wrap;margin:4px 0}.text{font-style:italic}
.cols{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px;margin-top:10px}.cols.solo{grid-template-columns:1fr}
@media (max-width:800px){.cols{grid-template-columns:1fr}}
.takes,.lines{display:flex;flex-wrap:wrap;gap:12px;align-content:flex-start}.lines{flex-direction:column}
.job{flex:1 1 300px;max-width:520px;border-top:3px solid var(--line);padding-top:6px}.lines .job{flex:0 0 auto;max-width:none}
.single .job{max-width:520px}
.job[data-status=failed],.job[data-status=cancelled]{border-color:var(--bad)}.job[data-status=succeeded]{border-color:var(--re)}
.job[data-status=skipped]{border-color:var(--ok)}.job[data-status=pending]{border-color:var(--warn)}
video{width:100%;aspect-ratio:16/9;background:#000;border-radius:4px}audio{width:100%}
.nomedia{display:flex;align-items:center;justify-content:center;color:var(--mute);border:1px dashed var(--line);border-radius:4px;padding:8px}
.nomedia.video{aspect-ratio:16/9}
.label{margin:4px 0}.id{font-family:ui-monospace,monospace}.take-no{color:var(--mute)}
.picked{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;background:var(--ok)}
.versions{margin-top:6px}.version{margin:6px 0}.version video{max-width:320px}
.facts{display:flex;flex-wrap:wrap;gap:2px 12px;color:var(--mute);font-size:13px}.facts b{font-weight:600}
.delivered,.edited{color:var(--warn)}.means{margin:0 4px;color:var(--mute)}.filters .label{color:var(--mute)}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;background:var(--mute)}
.badge.succeeded{background:var(--re)}.badge.skipped{background:var(--ok)}.badge.failed,.badge.cancelled{background:var(--bad)}.badge.pending{background:var(--warn)}
.badge.run.succeeded{background:var(--ok)}.badge.run.partial,.badge.run.interrupted{background:var(--warn)}.badge.run.failed{background:var(--bad)}
.error{color:var(--bad);white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0}.warning{color:var(--warn);margin:4px 0}
.empty{color:var(--mute);padding:20px}
`;
