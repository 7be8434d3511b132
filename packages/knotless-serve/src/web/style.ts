/** The one stylesheet: small, light and dark by the reader's preference, no web fonts. */
export const STYLE = `
:root{--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--panel:#f6f8fa;--link:#0969da;--add:#dafbe1;--del:#ffebe9;--hunk:#ddf4ff;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--panel:#151b23;--link:#4493f8;--add:#12361f;--del:#4b1c1f;--hunk:#0c2d6b}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;gap:1rem;align-items:center;padding:.6rem 1.2rem;border-bottom:1px solid var(--line);background:var(--panel)}
.brand{font-weight:700;color:var(--fg)}
.search{margin-left:auto}.search input{padding:.3rem .5rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg);min-width:16rem}
main{max-width:1100px;margin:0 auto;padding:1rem 1.2rem}
footer{color:var(--muted);font-size:.85rem;text-align:center;padding:2rem}
h1{font-size:1.4rem;margin:.4rem 0}h2{font-size:1.1rem;margin:1.2rem 0 .5rem}
.muted{color:var(--muted)}
.box{border:1px solid var(--line);border-radius:6px;margin:.8rem 0;overflow-x:auto}
.box>.head{background:var(--panel);padding:.5rem .8rem;border-bottom:1px solid var(--line)}
table.list{width:100%;border-collapse:collapse}
table.list td{padding:.35rem .8rem;border-top:1px solid var(--line);vertical-align:top}
table.list tr:first-child td{border-top:0}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
pre{margin:0;padding:.8rem;overflow:auto}
.readme{padding:.2rem 1.2rem}.readme pre{background:var(--panel);border-radius:6px}
.pad{padding:.6rem .8rem}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.nowrap{white-space:nowrap}.num{text-align:right}.grow{flex:1}
.tabs{display:flex;flex-wrap:wrap;gap:0 1.2rem;border-bottom:1px solid var(--line);margin:.6rem 0}
.tabs a{padding:.3rem 0;color:var(--fg)}.tabs a[aria-current]{border-bottom:2px solid var(--link);font-weight:600}
.bar{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center;margin:.6rem 0}
.counts a{margin-right:.8rem}
.latest{margin:.4rem 0}
details.switch{position:relative}
details.switch>summary,.btn{cursor:pointer;list-style:none;border:1px solid var(--line);border-radius:6px;padding:.2rem .6rem;background:var(--panel);color:var(--fg)}
details.switch .menu{position:absolute;z-index:2;top:2.1rem;left:0;min-width:16rem;max-height:24rem;overflow:auto;background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:.4rem .8rem;box-shadow:0 4px 12px #0003}
details.switch ul{list-style:none;margin:0 0 .4rem;padding:0}details.switch li{padding:.1rem 0}
details.clone{border:1px solid var(--line);border-radius:6px;margin:.6rem 0}
details.clone>summary{cursor:pointer;background:var(--panel);padding:.4rem .8rem;font-weight:600}
.copyrow{display:block;margin:.2rem 0 .5rem}.copyrow>span:first-child{display:block;font-size:.85rem;color:var(--muted)}
.copyline{display:flex;gap:.4rem}
.copyline input{flex:1;min-width:0;font-family:ui-monospace,monospace;padding:.3rem;border:1px solid var(--line);border-radius:6px;background:var(--panel);color:var(--fg)}
button{font:inherit;cursor:pointer;border:1px solid var(--line);border-radius:6px;padding:.2rem .7rem;background:var(--panel);color:var(--fg)}
table.tree td.msg{width:55%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;max-width:0}
table.list td.nowrap{white-space:nowrap}
.stat{font-family:ui-monospace,monospace;font-size:13px}.stat .a{color:#1a7f37}.stat .d{color:#cf222e}
table.code td.o,table.code td.n2{color:var(--muted);text-align:right;user-select:none;width:1%}
/* Code cells keep their spaces (pre); a number cell's markup breaks lines around its link, which must not show. */
table.code td.o,table.code td.n2,table.code td.n{white-space:nowrap}
table.code.blame td.b-who{white-space:nowrap;font-family:system-ui,sans-serif;width:1%;max-width:24rem;overflow:hidden;text-overflow:ellipsis}
table.code.blame tr.b-first td{border-top:1px solid var(--line)}
.pager{display:flex;gap:1rem;margin:.8rem 0}
.push-refs{display:flex;flex-wrap:wrap;gap:.2rem;align-items:baseline}.push-refs a{margin-right:.6rem}
@media (prefers-color-scheme:dark){.stat .a{color:#3fb950}.stat .d{color:#f85149}}
@media (max-width:640px){main{padding:.6rem}header.top{flex-wrap:wrap}.search{margin-left:0;width:100%}.search input{min-width:0;width:100%}table.tree td.msg,table.list td.hide-narrow{display:none}table.code td{font-size:12px}}
.pill{display:inline-block;border:1px solid var(--line);border-radius:2em;padding:0 .5em;font-size:.8rem;margin-right:.3em}
table.code{border-collapse:collapse;width:100%}
table.code td{padding:0 .8rem;white-space:pre;font-family:ui-monospace,monospace;font-size:13px;vertical-align:top}
table.code td.n{color:var(--muted);text-align:right;user-select:none;width:1%}
.d-add{background:var(--add)}.d-del{background:var(--del)}.d-hunk{background:var(--hunk);color:var(--fg)}
.crumbs{margin:.4rem 0}
.box>.head.bar{margin:0}
.hljs-keyword,.hljs-built_in,.hljs-selector-tag{color:#cf222e}.hljs-string,.hljs-attr{color:#0a3069}.hljs-comment{color:var(--muted);font-style:italic}.hljs-number,.hljs-literal{color:#0550ae}.hljs-title,.hljs-function{color:#8250df}
@media (prefers-color-scheme:dark){.hljs-keyword,.hljs-built_in,.hljs-selector-tag{color:#ff7b72}.hljs-string,.hljs-attr{color:#a5d6ff}.hljs-number,.hljs-literal{color:#79c0ff}.hljs-title,.hljs-function{color:#d2a8ff}}
.st-open{border-color:#1a7f37;border-width:2px}.st-closed{border-color:#cf222e;border-width:2px}.st-merged{border-color:#8250df;border-width:2px}
h2.title{font-size:1.3rem}.box.comment>.readme{padding:.2rem .8rem}.newpull h2{margin:0;font-size:1rem}
table.rounds a[aria-current]{font-weight:700}
a.who,a.u{text-decoration:underline}
form.inline{display:inline}.signedin{display:flex;gap:.5rem;align-items:center}
form.stack{display:flex;flex-direction:column;gap:.3rem}form.stack input,form.stack textarea,form.stack select{font:inherit;padding:.3rem .5rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg)}
.error{border:1px solid #cf222e;border-radius:6px;padding:.4rem .8rem}
table.code tr.notes td{white-space:normal;font-family:system-ui,sans-serif;padding:.4rem .8rem;border-top:1px solid var(--line);border-bottom:1px solid var(--line)}
table.code td.n2 a{color:inherit}.stars{margin-left:.6rem}
ul.checks{list-style:none;margin:0}ul.checks li{padding:.15rem 0}.ck-icon{display:inline-block;width:1.2em;font-weight:700}
.ck-success .ck-icon,a.ck-badge.ck-success span{color:#1a7f37}.ck-failure .ck-icon,.ck-error .ck-icon,a.ck-badge.ck-failure span{color:#cf222e}.ck-pending .ck-icon,a.ck-badge.ck-pending span{color:#9a6700}
.merge-checks{border:1px solid var(--line);border-radius:6px;padding:.4rem .8rem}.ignored-checks{border:1px solid #cf222e;border-radius:6px;padding:.4rem .8rem}
@media (prefers-color-scheme:dark){.ck-success .ck-icon,a.ck-badge.ck-success span{color:#3fb950}.ck-failure .ck-icon,.ck-error .ck-icon,a.ck-badge.ck-failure span{color:#f85149}.ck-pending .ck-icon,a.ck-badge.ck-pending span{color:#d29922}}
`;
