//! A suite's item page (`items-<suite>.html`): a row per unit and, per model, the value,
//! the answer's first line and a transcript link, with a choice of the metric shown (every
//! unit metric of the suite: each `qa` scorer) and client-side filters on it (all, failed,
//! errored, no value, different between models, differs from a baseline model), a text search,
//! sorting by any column and pages of rows, so 36,000 units open at once.
//!
//! Safety as on the index: the rows travel as JSON in a data block (`<`, `>` and `&`
//! escaped as `\u003c` …, so no text can close it) and the script writes every string with
//! `textContent`, never as markup; links were made safe with [`safe_href`]. The page's CSP
//! allows only its own style and script, by hash, and no network at all.

use std::fmt::Write as _;

use super::escape::push_escaped;
use super::html::{csp_hash, safe_href};
use super::items::SuiteItems;
use super::svg::figure_file_stem;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 16px;color:#1a1a1a}\
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f4f4f4;cursor:pointer}td.num{text-align:right;font-variant-numeric:tabular-nums}td.err{background:#fdecea}td.none{color:#888}td.zero{color:#7a1010}\
td.ans{max-width:22em;overflow-wrap:anywhere;font-family:ui-monospace,monospace;font-size:12px}td a{margin-left:6px;font-size:11px}\
#controls button[aria-pressed=true]{background:#0a3069;color:#fff}#controls{display:flex;flex-wrap:wrap;gap:8px;align-items:center}\
p.note{color:#555;font-size:13px}";

const SCRIPT: &str = "(function(){var d=JSON.parse(document.getElementById('items-data').textContent),M=d.models.length;\
var st={filter:'all',base:0,k:0,q:'',sort:-1,dir:1,page:0,size:100};\
function num(v){return typeof v==='number';}\
function vs(r){return r[3][st.k];}\
function failed(r){var x=vs(r),b=d.metrics[st.k].binary;for(var m=0;m<M;m++){var v=x[m];if(num(v)&&(b?v===0:v<=0))return true;}return false;}\
function errored(r){var x=vs(r);for(var m=0;m<M;m++){if(x[m]==='E')return true;}return false;}\
function novalue(r){var x=vs(r);for(var m=0;m<M;m++){if(x[m]===null)return true;}return false;}\
function different(r){var x=vs(r),y=null;for(var m=0;m<M;m++){var v=x[m];if(num(v)){if(y===null)y=v;else if(v!==y)return true;}}return false;}\
function flipped(r){var x=vs(r),b=x[st.base];if(!num(b))return false;for(var m=0;m<M;m++){var v=x[m];if(m!==st.base&&num(v)&&v!==b)return true;}return false;}\
var tests={all:function(){return true;},failed:failed,errored:errored,none:novalue,different:different,flipped:flipped};\
var hay=d.rows.map(function(r){return (d.tasks[r[0]]+'\\u0000'+r[2]+'\\u0000'+r[4].join('\\u0000')).toLowerCase();});\
function key(r,c){if(c===0)return d.tasks[r[0]];if(c<3)return r[c];var m=(c-3)>>1;if((c-3)&1)return r[4][m];var v=vs(r)[m];return num(v)?v:(v===null?-Infinity:-1e308);}\
function cmp(a,b){return a<b?-1:a>b?1:0;}\
function el(t,txt,cls){var e=document.createElement(t);if(txt!==undefined)e.textContent=txt;if(cls)e.className=cls;return e;}\
var body=document.querySelector('#items tbody'),count=document.getElementById('count'),pageLabel=document.getElementById('page'),shown=document.getElementById('shown');\
function visible(){var f=tests[st.filter],q=st.q,out=[];for(var i=0;i<d.rows.length;i++){if(f(d.rows[i])&&(q===''||hay[i].indexOf(q)>=0))out.push(i);}\
if(st.sort>=0){var c=st.sort,dir=st.dir;out.sort(function(x,y){return dir*cmp(key(d.rows[x],c),key(d.rows[y],c))||x-y;});}return out;}\
function counts(){var bs=document.querySelectorAll('#controls button[data-filter]');for(var i=0;i<bs.length;i++){var f=tests[bs[i].dataset.filter],n=0;\
for(var j=0;j<d.rows.length;j++)if(f(d.rows[j]))n++;bs[i].textContent=bs[i].dataset.label+' ('+n+')';}shown.textContent=d.metrics[st.k].name;}\
function draw(){var v=visible(),size=st.size>0?st.size:v.length||1,pages=Math.max(1,Math.ceil(v.length/size));if(st.page>=pages)st.page=pages-1;\
body.textContent='';var from=st.page*size,to=Math.min(v.length,from+size),frag=document.createDocumentFragment();\
for(var i=from;i<to;i++){var r=d.rows[v[i]],xs=vs(r),tr=el('tr');tr.dataset.key=d.tasks[r[0]]+'|'+r[1]+'|'+r[2];\
tr.appendChild(el('td',d.tasks[r[0]]));tr.appendChild(el('td',String(r[1]),'num'));tr.appendChild(el('td',String(r[2]),'num'));\
for(var m=0;m<M;m++){var x=xs[m],td=el('td',num(x)?String(x):(x===null?'\\u2013':'error'),num(x)?(x===0?'num zero':'num'):(x===null?'num none':'err'));\
if(x===null)td.title='no value for this metric';var href=d.links[r[0]+':'+r[1]+':'+m];if(href){var a=el('a','transcript');a.setAttribute('href',href);td.appendChild(a);}\
tr.appendChild(td);tr.appendChild(el('td',r[4][m],'ans'));}frag.appendChild(tr);}body.appendChild(frag);\
count.textContent=v.length+' of '+d.rows.length+' rows';pageLabel.textContent='page '+(st.page+1)+' of '+pages;}\
var bs=document.querySelectorAll('#controls button[data-filter]');\
for(var i=0;i<bs.length;i++){bs[i].addEventListener('click',function(e){st.filter=e.currentTarget.dataset.filter;st.page=0;\
for(var k=0;k<bs.length;k++)bs[k].setAttribute('aria-pressed',String(bs[k]===e.currentTarget));draw();});}\
var metric=document.getElementById('metric');metric.addEventListener('change',function(){st.k=Number(metric.value);st.page=0;counts();draw();});\
var base=document.getElementById('baseline');base.addEventListener('change',function(){st.base=Number(base.value);st.page=0;counts();draw();});\
var q=document.getElementById('q');q.addEventListener('input',function(){st.q=q.value.toLowerCase();st.page=0;draw();});\
var size=document.getElementById('size');size.addEventListener('change',function(){st.size=Number(size.value);st.page=0;draw();});\
document.getElementById('prev').addEventListener('click',function(){if(st.page>0){st.page--;draw();}});\
document.getElementById('next').addEventListener('click',function(){st.page++;draw();});\
var hs=document.querySelectorAll('#items thead th');for(var h=0;h<hs.length;h++){hs[h].addEventListener('click',(function(c){return function(){\
st.dir=st.sort===c?-st.dir:1;st.sort=c;for(var k=0;k<hs.length;k++)hs[k].removeAttribute('aria-sort');\
hs[c].setAttribute('aria-sort',st.dir>0?'ascending':'descending');draw();};})(h));}\
document.getElementById('controls').hidden=false;counts();draw();})();";

/// The file name of a suite's item page, next to `index.html`.
#[must_use]
pub fn items_file(suite: &str) -> String {
    format!("items-{}.html", figure_file_stem(suite))
}

/// A suite's item page.
#[must_use]
pub fn render_items_page(title: &str, items: &SuiteItems) -> String {
    let mut data = serde_json::to_string(items).unwrap_or_else(|_| "{}".to_owned());
    data = data.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    let mut out = String::with_capacity(data.len() + 8 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src '{}'; script-src '{}'; base-uri 'none'; form-action 'none'\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"referrer\" content=\"no-referrer\">\n<title>",
        csp_hash(STYLE),
        csp_hash(SCRIPT)
    );
    push_escaped(&mut out, &format!("{title}: items of {}", items.suite));
    let _ = write!(out, "</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>Items of ");
    push_escaped(&mut out, &items.suite);
    out.push_str(
        "</h1>\n<p><a href=\"index.html\">back to the report</a></p>\n<p class=\"note\">One row per unit (task, seed, item); per model the value of the metric chosen (<code id=\"shown\">",
    );
    push_escaped(&mut out, items.metrics.first().map_or("", |m| m.name.as_str()));
    out.push_str(
        "</code>), the answer's first line and the cell's transcript. <em>failed</em>: a model scored 0 (or below on a non-0/1 metric); \
         <em>errored</em>: a model's cell failed; <em>no value</em>: a model's cell was scored but holds no value on this metric for the unit \
         (a scorer its task does not have, a judge that gave no grade), shown as <code>–</code>; <em>different</em>: models with a value disagree; \
         <em>differs from baseline</em>: a model's value differs from the baseline model's (<code>evalgrid diff</code> calls a unit whose value changed between two runs <em>flipped</em>). The same units are in <code>items.csv</code>.</p>\n\
         <noscript><p>The filters need JavaScript; <code>items.csv</code> has every row.</p></noscript>\n<div id=\"controls\" hidden>",
    );
    out.push_str("<label>metric <select id=\"metric\">");
    for (i, m) in items.metrics.iter().enumerate() {
        let _ = write!(out, "<option value=\"{i}\">");
        push_escaped(&mut out, &m.name);
        out.push_str("</option>");
    }
    out.push_str("</select></label>");
    // Against the baseline model is "differs from baseline"; "flipped" is `diff`'s word for a
    // unit that changed between two runs.
    for (f, label) in
        [("all", "all"), ("failed", "failed"), ("errored", "errored"), ("none", "no value"), ("different", "different"), ("flipped", "differs from baseline")]
    {
        let _ = write!(out, "<button type=\"button\" data-filter=\"{f}\" data-label=\"{label}\" aria-pressed=\"{}\">{label}</button>", f == "all");
    }
    out.push_str("<label>baseline <select id=\"baseline\">");
    for (i, m) in items.models.iter().enumerate() {
        let _ = write!(out, "<option value=\"{i}\">");
        push_escaped(&mut out, m);
        out.push_str("</option>");
    }
    out.push_str("</select></label><input type=\"search\" id=\"q\" placeholder=\"search task or answer\" aria-label=\"search\">");
    out.push_str("<label>rows <select id=\"size\"><option value=\"100\">100</option><option value=\"1000\">1000</option><option value=\"0\">all</option></select></label>");
    out.push_str("<span id=\"count\"></span><button type=\"button\" id=\"prev\">previous</button><span id=\"page\"></span><button type=\"button\" id=\"next\">next</button></div>\n");
    out.push_str("<table id=\"items\">\n<thead><tr><th>task</th><th>seed</th><th>item</th>");
    for m in &items.models {
        out.push_str("<th>");
        push_escaped(&mut out, m);
        out.push_str("</th><th>");
        push_escaped(&mut out, m);
        out.push_str(" answer</th>");
    }
    out.push_str("</tr></thead>\n<tbody></tbody>\n</table>\n<script type=\"application/json\" id=\"items-data\">");
    out.push_str(&data);
    let _ = write!(out, "</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// `links` with every path made safe for `href` (those that cannot be are dropped).
#[must_use]
pub fn safe_links(links: &std::collections::BTreeMap<String, String>) -> std::collections::BTreeMap<String, String> {
    links.iter().filter_map(|(k, v)| Some((k.clone(), safe_href(v)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::super::items::Entry;
    use super::*;

    #[test]
    fn provider_text_cannot_close_the_data_block_or_become_markup() {
        let hostile = "</script><script>alert(1)</script><img src=x onerror=alert(2)>&amp;";
        let items = SuiteItems {
            suite: "s<b>".into(),
            metrics: vec![super::super::items::MetricColumn { name: "correct".into(), binary: true }],
            models: vec![hostile.into()],
            tasks: vec!["t".into()],
            rows: vec![(0, 0, 1.into(), vec![vec![Entry::Value(1.0)]], vec![hostile.into()])],
            links: std::collections::BTreeMap::new(),
        };
        let page = render_items_page("r", &items);
        assert_eq!(page.matches("<script").count(), 2, "only the data block and our script");
        assert!(!page.contains("<img") && !page.contains("<b>"), "{page}");
        let data = &page[page.find("id=\"items-data\">").unwrap()..];
        let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["rows"][0][4][0], hostile, "the text survives as text");
    }
}
