// The review page's only script, inline, allowed by its hash. It shows and hides what is already on
// the page (filters, the grid or one row's detail) and handles picks: served, each choice is
// posted to the server with the page's token; from a file or S3, the choices become a
// picks.yaml to download. Nothing else is fetched, and no data is read from anywhere but the page.
export const SCRIPT = `
(function(){
  var d=document,body=d.body;
  var buttons=d.querySelectorAll('nav.filters button');
  var tiles=d.querySelectorAll('#grid .tile');
  var rows=d.querySelectorAll('main .row');
  var shown=d.getElementById('shown');
  var empty=d.getElementById('empty');
  function has(el,f){return f==='all'||(' '+el.getAttribute('data-filters')+' ').indexOf(' '+f+' ')>=0;}
  function apply(f){
    var n=0;
    for(var i=0;i<tiles.length;i++){var on=has(tiles[i],f);tiles[i].hidden=!on;if(on)n++;}
    for(var k=0;k<buttons.length;k++){
      buttons[k].setAttribute('aria-pressed',String(buttons[k].getAttribute('data-filter')===f));
    }
    body.setAttribute('data-filter',f);
    shown.textContent=n+' of '+tiles.length+' rows';
    empty.hidden=n>0;
  }
  function route(){
    var h=location.hash.slice(1),open=null;
    if(h.indexOf('open=')===0){
      var key=decodeURIComponent(h.slice(5));
      for(var i=0;i<rows.length;i++){if(rows[i].getAttribute('data-key')===key)open=rows[i];}
    }
    for(var j=0;j<rows.length;j++){rows[j].classList.toggle('open',rows[j]===open);}
    body.setAttribute('data-view',open?'detail':'grid');
    if(open){window.scrollTo(0,0);return;}
    if(h==='changed')h='generated';
    if(['failed','generated','reused'].indexOf(h)>=0)apply(h);
  }
  for(var b=0;b<buttons.length;b++){
    buttons[b].addEventListener('click',function(e){apply(e.currentTarget.getAttribute('data-filter'));});
  }
  window.addEventListener('hashchange',route);
  apply('all');
  route();

  var meta=d.querySelector('meta[name="clapper-review-token"]');
  var token=meta?meta.getAttribute('content'):null;
  var radios=d.querySelectorAll('input[type=radio][data-shot]');
  var status=d.getElementById('picks-status');
  var link=d.getElementById('picks-download');
  var picks={},url=null;
  function pickIn(r){var p={take:Number(r.value)},v=r.getAttribute('data-version');if(v)p.version=Number(v);return p;}
  function same(a,b){return !!a&&!!b&&a.take===b.take&&a.version===b.version;}
  function fromServer(s){var o={};for(var k in s){if(Object.prototype.hasOwnProperty.call(s,k))o[k]=typeof s[k]==='number'?{take:s[k]}:s[k];}return o;}
  for(var r=0;r<radios.length;r++){if(radios[r].checked)picks[radios[r].getAttribute('data-shot')]=pickIn(radios[r]);}
  function show(){
    for(var i=0;i<radios.length;i++){
      var shot=radios[i].getAttribute('data-shot'),on=same(picks[shot],pickIn(radios[i]));
      radios[i].checked=on;
      var fig=radios[i].closest('.thumb');
      if(fig){if(on)fig.setAttribute('data-picked','');else fig.removeAttribute('data-picked');}
    }
    var n=Object.keys(picks).length;
    if(status)status.textContent=n+(n===1?' shot':' shots')+' picked';
  }
  function yaml(){
    var keys=Object.keys(picks),s='# The take picked for each shot (takes count from 1); \`clapper assemble\` uses them.\\nshots:';
    if(keys.length===0)return s+' {}\\n';
    for(var i=0;i<keys.length;i++){
      var k=keys[i];
      var p=picks[k];
      s+='\\n  '+(/^[A-Za-z0-9_-]+$/.test(k)?k:JSON.stringify(k))+': '+(p.version===undefined?p.take:'{ take: '+p.take+', version: '+p.version+' }');
    }
    return s+'\\n';
  }
  function offer(){
    if(!link)return;
    if(url)URL.revokeObjectURL(url);
    url=URL.createObjectURL(new Blob([yaml()],{type:'text/yaml'}));
    link.href=url;
    link.removeAttribute('aria-disabled');
  }
  function save(shot,pick){
    var before=JSON.stringify(picks);
    picks[shot]=pick;
    show();
    if(!token){offer();return;}
    if(status)status.textContent='saving';
    fetch('/picks',{method:'POST',headers:{'content-type':'application/json','x-clapper-token':token},body:JSON.stringify({shot:shot,take:pick.take,version:pick.version})})
      .then(function(res){
        return res.json().then(function(a){if(!res.ok)throw new Error(a.error||('HTTP '+res.status));return a;});
      })
      .then(function(a){picks=fromServer(a.shots||{});show();if(status)status.textContent+=', saved to picks.yaml';})
      .catch(function(e){picks=JSON.parse(before);show();if(status)status.textContent='not saved: '+e.message;});
  }
  for(var q=0;q<radios.length;q++){
    radios[q].addEventListener('change',function(e){
      var t=e.currentTarget;
      if(t.checked)save(t.getAttribute('data-shot'),pickIn(t));
    });
  }
  show();
  if(!token&&Object.keys(picks).length>0)offer();
})();
`;
